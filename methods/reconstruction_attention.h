// The reconstruction attention that KVzip and KVgrad score cached entries by (kvpress 0.5.5
// kvpress/presses/kvzip_press.py KVzipPress._compute_cross_attention, which KVgradPress reuses):
// a chunk's T post-RoPE query rows attend over a SUBSET of keys — the n = min(n_sink, first)
// sink keys, the chunk's own cached keys k_first..k_{end−1}, and the T keys of the chunk's rows
// (causal among themselves):
//   a_h(t, ·) = softmax( q_{h,t} · k_· / √d )   over that subset,
// and each cached entry j of the chunk gets, per KV group g,
//   s_ℓ,g(j) = max over rows t and the query heads h of group g of  weight(h, t, j, a_h(t, j)).
// The weight is the method's (KVzip: a, KVzip+: a/‖x_t‖·‖W_O^{(h)} v_j‖, KVgrad:
// a·‖W_O^{(h)} v_j‖·‖∂Φ/∂a_t‖). Numerics (bf16 models): q·k, ÷√d and the softmax output are
// rounded to bf16 as kvpress's bf16 tensors are; the weight rounds what it computes itself.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/layer_capture.h"

namespace kvaudit::methods {

// weight(h, t, a): turns query head h's attention weights of chunk row t on the chunk's columns
// (a[j]: cached position first + j) into the method's weights, in place.
using ReconstructionWeight = std::function<void(int h, int t, std::span<float> a)>;

// Checks that `rows` match `cached` and the chunk (std::invalid_argument naming `method` and the
// layer), then writes s_ℓ,g(j) into result.at(layer, g, first + j) for every chunk column.
void fold_reconstruction_attention(const LayerCapture& cached, const PassChunk& chunk,
                                   const PassLayerView& rows, int n_sink,
                                   const ReconstructionWeight& weight, const std::string& method,
                                   ExtraPassResult& result);

// ‖W_O^{(h)} v_j‖₂ for every query head h and chunk column j ([H, end − first], row-major): v_j
// the cached value of h's KV group through h's columns of o_proj (each output rounded like the
// model's matmul, the norm too). Throws std::invalid_argument naming `method` when the capture
// has no o_proj.
std::vector<float> chunk_value_output_norms(const LayerCapture& cached, const PassChunk& chunk,
                                            const std::string& method);

// ‖x‖₂ over n elements (torch.norm: f32 accumulation of the squares, here in double).
float reconstruction_l2_norm(const float* x, std::size_t n);

}  // namespace kvaudit::methods
