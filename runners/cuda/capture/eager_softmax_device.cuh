// Device twins of the CPU eager-softmax arithmetic (runners/cpu/attention_math.cpp), used by the
// column-sum kernels so that a GPU probability equals the CPU's bit for bit whenever the row's
// f32 exp sum agrees:
//   logit  s = [[q·k]·scale]   (q·k: f32 FMA chain over e in order, as the AVX2/AVX-512 clones
//                              of score_tile compute it; brackets: bf16 rounding in bf16 mode)
//   e      = vector_exp(s − max_row)   (the CPU's Cody–Waite + Cephes degree-5 polynomial, with
//                              the fused multiply-adds GCC forms under -ffp-contract=fast)
//   p      = [e / Σ e]
// This header is included by .cu files compiled with -fmad=false: every fusion below is explicit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace kvaudit::cuda::capture_device {

// f32 → nearest bf16 (ties to even) → f32; NaN stays NaN (model::round_to_bf16).
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float maybe_round_bf16(float x, bool bf16) {
  return bf16 ? round_bf16(x) : x;
}

// Σ_e q[e]·k[e] as an FMA chain in increasing e (accumulator starts at 0).
__device__ __forceinline__ float dot_fma(const float* q, const float* k, int dim) {
  float acc = 0.0f;
  for (int e = 0; e < dim; ++e) acc = __fmaf_rn(q[e], k[e], acc);
  return acc;
}

// The eager logit of a raw score: [[s]·scale] in bf16 mode, s·scale otherwise.
__device__ __forceinline__ float eager_logit(float raw, float scale, bool bf16) {
  return maybe_round_bf16(__fmul_rn(maybe_round_bf16(raw, bf16), scale), bf16);
}

// e^r for |r| ≤ 0.35 (attention_math.cpp exp_polynomial).
__device__ __forceinline__ float exp_polynomial(float r) {
  const float z = __fmul_rn(r, r);
  float p = 1.9875691500e-4f;
  p = __fmaf_rn(p, r, 1.3981999507e-3f);
  p = __fmaf_rn(p, r, 8.3334519073e-3f);
  p = __fmaf_rn(p, r, 4.1665795894e-2f);
  p = __fmaf_rn(p, r, 1.6666665459e-1f);
  p = __fmaf_rn(p, r, 5.0000001201e-1f);
  return __fadd_rn(__fmaf_rn(p, z, r), 1.0f);
}

// attention_math.cpp vector_exp: x = n·ln2 + r, n = round(x·log2 e) via the 1.5·2^23 shifter.
__device__ __forceinline__ float vector_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  constexpr float kShifter = 12582912.0f;
  const float n = __fsub_rn(__fmaf_rn(clamped, 1.44269504088896341f, kShifter), kShifter);
  const float r1 = __fmaf_rn(-n, 0.693359375f, clamped);
  const float r = __fmaf_rn(-n, -2.12194440e-4f, r1);
  const int exponent = (static_cast<int>(n) + 127) << 23;
  const float y = __fmul_rn(exp_polynomial(r), __int_as_float(exponent));
  return x < -87.0f ? 0.0f : (x != x ? x : y);
}

// p = [e / total] (IEEE division).
__device__ __forceinline__ float eager_probability(float logit, float row_max, float row_sum,
                                                   bool bf16) {
  return maybe_round_bf16(__fdiv_rn(vector_exp(__fsub_rn(logit, row_max)), row_sum), bf16);
}

}  // namespace kvaudit::cuda::capture_device
