// GPU scorers: the methods whose scoring touches O(L) data per head, computed on the GPU from a
// DeviceLayerCapture (device_layer_capture.h), each the twin of its CPU Scorer (methods/<name>.h)
// and producing the same scores[kv_head·L + j]:
//   knorm               −‖k_j‖ (fp64, rounded once)                         methods/knorm.h
//   keydiff (oneshot)   −cos(k_j, anchor) (fp64)                            methods/keydiff.h
//   tova (kvpress, original)  head-mean last-row attention                  methods/tova.h
//   snapkv (kvpress, original)  pooled window attention                      methods/snapkv.h
//   observed_attention  column_sums / (L − j), group mean (fp64) methods/observed_attention.h
//   expected_attention  softmax of the expected logits (fp64; μ', Σ' on the host)
//   methods/expected_attention.h
// The GPU code performs the CPU scorer's operations in the same order and at the same precision,
// with the same bf16 rounding points (methods/bf16_rounding.h) and kvpress's protected-window
// "layer max + 1" rule, compiled with -fmad=false; fp64 sums over a head's positions run in
// position order in one thread. The only operations that may differ in their last bit are fp64
// exp (CUDA's ≤ 1 ulp vs glibc's) in window attention and ExpectedAttention, so those scores can
// differ from the CPU's by an f32 ulp in rare cases; the others are bit-identical. (A NaN score is
// not expected; the max + 1 rule here ignores NaNs, where the CPU's takes a NaN in the first slot.)
//
//   auto spec = gpu_scorer_for(method.parameters());  // nullopt: no GPU scorer for this method
//   score_on_gpu(*spec, capture.device_layer(l, b), rope_inv_freq, scores.data(), stream);
//   auto kept = select_top_k_on_gpu(...);           // gpu_top_k.h
#pragma once

#include <cuda_runtime.h>

#include <optional>
#include <span>

#include "methods/expected_attention.h"
#include "methods/method_params.h"
#include "runners/cuda/capture/device_layer_capture.h"

namespace kvaudit::cuda {

enum class GpuScorerKind { knorm, keydiff, tova, snapkv, observed_attention, expected_attention };

// Which GPU scorer, with the method's typed parameters (method_params.h).
struct GpuScorerSpec {
  GpuScorerKind kind = GpuScorerKind::knorm;
  methods::TovaVariant tova = methods::TovaVariant::kvpress;
  methods::SnapKvParams snapkv;
  methods::ExpectedAttentionParams expected;
};

// The GPU scorer of a method whose selection is the per-head top-k of one score tensor, chosen by
// its typed parameters (methods::Method::parameters(), as make_method recorded them): knorm,
// keydiff (variant oneshot), tova, snapkv, observed_attention, expected_attention. nullopt for
// every other method (wrappers, pyramidkv, keydiff block, random, streaming_llm, methods built
// outside the catalogue, ...), which then run their CPU code on the GPU-captured data.
std::optional<GpuScorerSpec> gpu_scorer_for(const methods::MethodParams& params);

// scores [Hkv, L] (device, f32) for one layer, computed on `stream`; returns after synchronizing
// the stream (its temporaries are freed; expected_attention also downloads the layer's moments).
// `rope_inv_freq` [d/2] is read by expected_attention only. Throws std::invalid_argument when
// the capture lacks what the scorer reads (window rows, column sums, moments) or L is too short,
// with the scorer's name and the layer.
void score_on_gpu(const GpuScorerSpec& spec, const DeviceLayerCapture& layer,
                  std::span<const float> rope_inv_freq, float* scores, cudaStream_t stream);

}  // namespace kvaudit::cuda
