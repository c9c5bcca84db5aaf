// FinchMethod: prompt-guided eviction, the observation window being the question (Corallo &
// Papotti 2024, "FINCH: Prompt-guided Key-Value Cache Compression for Large Language Models",
// TACL 12; kvpress 0.5.5 kvpress/presses/finch_press.py FinchPress).
//   Window: the w = question_tokens positions at the end of the view (SelectionContext::
//   question_tokens: the question under query-aware); A = window_attention(w)
//   (window_attention.h): row r is the query at position p_r = L − w + r, over the keys j ≤ p_r.
//   Scores of the candidates j < L − w, per query head h:
//     normalize_scores: s_h(j) = mean_r p_r · A_h(r, j)   (kvpress weights row r by p_r, one less
//                                                          than its p_r + 1 non-zero weights)
//     otherwise:        s_h(j) = mean_r A_h(r, j)
//   s(j) = mean of s_h(j) over the query heads of the KV head's group (no pooling, unlike SnapKV);
//   the w window positions get the layer's max + 1 (always kept when the budget allows).
//   Selection per KV head: chunk_length = 0: the n_kept = max(1, floor(L(1−cr))) best scores;
//   chunk_length = c > 0: positions [i, i + c) for i = 0, c, 2c, … (the last chunk partial) each
//   keep their own max(1, floor(len(1−cr))) best scores, so the total can exceed n_kept. kvpress
//   requires c > w / (1 − cr) (the window fits the last chunks' budget); so do we (select throws
//   for cr > 0). The chunks only split the top-k of ONE prefill's scores: no extra forward pass.
//   Ties as torch.topk on the CPU (top_k.h).
//   bf16 models: the weighted rows, the window mean, the group mean and the scores are rounded to
//   bf16 where kvpress's bf16 tensors round them.
//   rerotate_keys: after eviction the unit runner re-rotates the kept keys to the contiguous
//   positions 0..n−1 (runners/unit/unit_runner.cpp evict_cell → SequenceCache::rerotate_kept_keys,
//   the formula of key_rerotation.h); the CPU engine only, a CUDA rank fails the cell.
// Deviations from kvpress:
//   * The window comes from the protocol, not from a delimiter token: kvpress finds the question
//     after `<|finch_sep|>` and drops that token from the embeddings, so its prefill of
//     context + sep + question is ours of context + question with w = the question's length.
//   * Query-agnostic (no question in the view; the query-visibility study's "Finch without its
//     question"): kvpress has no definition; we use the last `window` context positions as the
//     window (SnapKV-like), which is kvpress's FinchPress with the delimiter placed `window` tokens
//     before the end of the context (the golden does exactly that).
//   * kvpress's pipeline feeds the question after a re-rotated cache at position n_kept; kvaudit
//     keeps every later token at its original position (as for key_rerotation).
// Tested: tests/methods/finch_test.cpp (hand-computed), tests/unit_runner/finch_fan_out_test.cpp
//   (the runner's question window and re-rotation), tests/methods/kvpress_parity_test.cpp
//   (kept_finch.json; KvpressParityRerotation: the re-rotated keys), tests/manifest/
//   finch_params_test.cpp (plan-time ranges).
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

// Parameters: FinchParams (method_params.h).

// The window a view uses: its question tokens, or `fallback_window` when it has none.
int finch_window(const SelectionContext& context, int fallback_window);

// Scores [Hkv, L] of one layer (the formula above).
class FinchScorer : public Scorer {
 public:
  explicit FinchScorer(FinchParams params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "finch"; }

 private:
  FinchParams params_;
};

// Per-KV-head top-k of `scores` [Hkv, L], chunk by chunk (chunk_length 0: one chunk of L).
std::vector<std::vector<std::int32_t>> chunked_top_k(std::span<const float> scores,
                                                     int num_kv_heads, int length, int chunk_length,
                                                     double compression);

class FinchMethod : public Method {
 public:
  explicit FinchMethod(FinchParams params);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return params_.window; }
  int window_rows_needed(int question_tokens) const override;
  std::string name() const override { return "finch"; }

 private:
  FinchParams params_;
  std::shared_ptr<const FinchScorer> scorer_;
};

}  // namespace kvaudit::methods
