// NonCausalAttentionScorer: chunked, non-causal attention received by each key, weighted by the
// value norm (Chari & Van Durme 2025, "Compactor: Calibrated Query-Agnostic KV Cache Compression
// with Approximate Leverage Scores", arXiv 2507.08143; kvpress 0.5.5
// kvpress/presses/non_causal_attention_press.py NonCausalAttnPress). Per layer, over the positions
// 0..L-1 cut into chunks of C = chunk_size consecutive positions (the last chunk zero-padded to C):
//   a_h(j) = Σ_{i in chunk(j)} softmax_{j' in chunk(j)}(q_i·k_j')    no 1/√d scale, no causal mask
//   s(j)   = avg_pool3( mean_{h in group} a_h(j) · ‖v_j‖₂ )          kernel 3, zero padding counted
//   z(j)   = (s(j) − mean s) / max(std s, 1e-6)                      mean and unbiased std over
//                                                                    every KV head and position
// q_i are the post-RoPE queries of every row (LayerCapture::queries), k_j the cached keys.
// kvpress's padding of the last chunk, restated: padded query rows get logits 0 against every key
// and padded keys logits −1e-9 (≈ 0) for every row, so each padded row adds ≈ 1/C to every column
// of the last chunk and every real row spreads a little mass onto the padded keys; we compute the
// same. bf16 models: q·k rounded to bf16 (kvpress's matmul in the model dtype), ‖v‖ rounded to
// bf16, everything else in fp32 as kvpress (we accumulate in double and round once to f32).
// Deviation: one score (Hkv·L = 1) has no std; kvpress gives NaN, we use std = 1e-6.
#pragma once

#include <string>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Throws std::invalid_argument (naming `method` and the layer) unless the capture carries the
// all-queries fields (LayerCapture::queries, queries_prerope, keys_prerope) of its shape.
void check_all_queries(const LayerCapture& layer, const std::string& method);

// s(j) before the z-normalisation for the positions first..first+count-1 only (CompactorPress
// scores a slice: chunks start at `first`), [Hkv, count] row-major, f32 values.
std::vector<float> non_causal_attention_scores(const LayerCapture& layer, int first, int count,
                                               int chunk_size);

// In place: (s − mean) / max(std, 1e-6) over all entries, unbiased std (torch.std), in double,
// rounded to f32.
void z_normalize(std::vector<float>& scores);

class NonCausalAttentionScorer : public Scorer {
 public:
  explicit NonCausalAttentionScorer(NonCausalAttentionParams params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool needs_all_queries() const override { return true; }
  std::string name() const override { return "non_causal_attention"; }

 private:
  NonCausalAttentionParams params_;
};

}  // namespace kvaudit::methods
