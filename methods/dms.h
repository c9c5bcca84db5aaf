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
// (attention_patch.py masked_key_indices); DMSPress's decoding = True (scoring and evicting
// generated tokens as they leave the window) is the decode-time compression of
// docs/design/decoding.md and is not built for DMS. The scores are the wrapped scorer's on the
// whole view (kvpress scores keys[:, :, -q_len:], the same L entries at prefill).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class DmsMethod final : public ScorerWrapperMethod {
 public:
  // Throws std::invalid_argument for a null scorer or sliding_window_size < 1 (every head keeps
  // at least its window).
  DmsMethod(std::shared_ptr<const Scorer> scorer, int sliding_window_size);
  // Budget::threshold is T (any finite value); Budget::compression is ignored.
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  int sliding_window_size_;
};

}  // namespace kvaudit::methods
