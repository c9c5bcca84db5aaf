// KeyRerotationMethod: a scorer's ScorerPress selection whose kept keys are then rotated to
// contiguous positions (kvpress 0.5.5 kvpress/presses/key_rerotation_press.py KeyRerotationPress;
// the position shift of StreamingLLM, Xiao et al. 2024, "Efficient Streaming Language Models with
// Attention Sinks", arXiv 2309.17453, and of FINCH, Corallo & Papotti 2024, TACL 12).
//   Selection: each KV head keeps the max(1, floor(L(1−cr))) best scores of the wrapped scorer
//   (torch.topk ties, top_k.h), exactly the inner press's kept set; kvpress sorts them: p_0 < … <
//   p_{n−1}.
//   Re-rotation of the kept key k at cache index i (original position p_i), δ = i − p_i, with the
//   model's RoPE inverse frequencies θ_m (m < d/2):
//     φ_m = δ·θ_m in f32; c = cos φ, s = sin φ over [φ, φ] (d entries), cast to the model dtype;
//     k' = k ⊙ c + rotate_half(k) ⊙ s,  rotate_half(x) = [−x_{d/2..d−1}, x_{0..d/2−1}],
//   each product and the sum rounded to bf16 for bf16 models (torch's bf16 arithmetic), so k' is
//   the key RoPE would have produced at position i (up to rounding). Values are not changed.
// Runtime: the unit runner applies it after eviction (runners/unit/unit_runner.cpp evict_cell →
// SequenceCache::rerotate_kept_keys; the CPU cache rotates its rows with rerotate_keys below);
// positions, values and the next token's RoPE position are unchanged, so the question and the
// answer keep their original positions while the context keys sit at 0..n−1, as in kvpress's
// pipeline. Only the CPU engine re-rotates: on a CUDA rank the cell fails with that message.
// Tested against kvpress's re-rotated keys (tests/methods/wrappers_test.cpp on the recorded
// inputs; tests/methods/kvpress_parity_test.cpp on the CPU cache after a real prefill) and in the
// unit runner (tests/unit_runner/key_rerotation_fan_out_test.cpp: fan-out = naive route).
#pragma once

#include <memory>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

// Re-rotated keys [n, d] of one KV head: keys are the kept rows [n, d] (in cache order), positions
// their original positions p_i (ascending), inv_freq [d/2].
std::vector<float> rerotate_keys(std::span<const float> keys,
                                 std::span<const std::int32_t> positions,
                                 std::span<const float> inv_freq, int head_dim, bool model_is_bf16);

class KeyRerotationMethod : public ScorerWrapperMethod {
 public:
  explicit KeyRerotationMethod(std::shared_ptr<const Scorer> scorer);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
};

}  // namespace kvaudit::methods
