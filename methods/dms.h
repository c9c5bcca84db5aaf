// DMS (threshold eviction outside a sliding window) around any scorer: kvpress 0.5.5
// kvpress/presses/dms_press.py DMSPress, prefill form (decoding = False), after Łańcucki et al.
// 2025, "Inference-Time Hyper-Scaling with KV Cache Compression" (Dynamic Memory Sparsification,
// arXiv 2506.05345), which kvpress pairs with KVzap (methods/kvzap.h).
//
// With s(h, t) the wrapped scorer's scores of the L candidates (scored as kvpress's DMSPress calls
// press.score: with the wrapped press's own compression ratio, 0), w = `sliding_window_size` and
// T the cell's threshold:
//   L ≤ w:  every position is kept;
//   L > w:  head h keeps  { t ≥ L − w }  ∪  { t < L − w : ¬(s(h, t) < T) }
// (the last w positions are never scored against T; a NaN score is kept, as torch.where(s < T)
// does not select it; T is compared in the scores' dtype, as torch casts a Python float to the
// tensor's dtype: bf16 for a bf16 model when the scorer's kvpress scores are in the model dtype
// (Scorer::scores_in_model_dtype: KVzap), f32 otherwise (Knorm's f32 norms, ...). Heads keep
// different counts; the realised retention is measured, not set (a threshold method: the grid's
// `thresholds`, which for dms may be of any sign — KVzap's scores are log-scale, kvpress's KVzap
// README uses T = −4). A larger T evicts more. Deviations: kvaudit evicts where kvpress masks
// (attention_patch.py masked_key_indices). The scores are the wrapped scorer's on the whole view
// (kvpress scores keys[:, :, -q_len:], the same L entries at prefill).
//
// decoding = true (kvpress DMSPress(decoding=True)): the rule goes on after the prefill. Every
// later forward of q entries (the rest of the prompt, then each generated token) scores only its q
// new entries, appends them to the per-layer window of the last w scores, and each entry that
// leaves the window (the oldest) is evicted from exactly the heads where its score < T:
//   entry p (original position) leaves when the layer has seen p + w + 1 entries (w newer ones),
//   head h evicts it iff s(h, p) < T,
// so every head keeps its last w positions and heads hold different counts. The window's first
// scores are the prefill's last min(L, w) (Selection::window_scores, filled by select when
// decoding); the decode-time part is runners/unit/dms_decoding.h. The scorer must be per-entry
// (Scorer::per_entry: knorm, kvzap): a window or attention scorer cannot score one new entry.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class DmsMethod final : public ScorerWrapperMethod {
 public:
  // Throws std::invalid_argument for a null scorer, sliding_window_size < 1 (every head keeps
  // at least its window) or, with decoding, a scorer that is not per_entry().
  DmsMethod(std::shared_ptr<const Scorer> scorer, int sliding_window_size, bool decoding = false);
  // Budget::threshold is T (any finite value); Budget::compression is ignored. With decoding, the
  // selection also carries the window's scores (Selection::window_scores).
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

  int sliding_window_size() const { return sliding_window_size_; }
  bool decoding() const { return decoding_; }

 private:
  int sliding_window_size_;
  bool decoding_;
};

// T as DMSPress compares it with scores of `scorer` (torch casts the Python float to the scores'
// dtype: bf16 when the model is bf16 and the scorer's scores are in the model dtype, else f32).
float dms_threshold(const Scorer& scorer, double threshold, bool model_is_bf16);
// Whether DMSPress evicts an entry of score `score` (`torch.where(scores < threshold)`; NaN stays).
inline bool dms_evicts(float score, float threshold) { return score < threshold; }

}  // namespace kvaudit::methods
