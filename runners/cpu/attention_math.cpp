// Vectorized attention inner loops; see attention_math.h. Written with GCC/Clang vector extensions
// (16 floats, split by the compiler into what each target clone has) so the accumulators stay in
// registers; FP contraction is allowed in this file only (CMakeLists.txt), so the AVX2/AVX-512
// clones use FMA.
#include "runners/cpu/attention_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/vector_clones.h"

namespace kvaudit::cpu {
namespace {

// The helpers are force-inlined so that each target clone compiles them for its own instruction
// set.
#define KVAUDIT_INLINE inline __attribute__((always_inline))

constexpr std::size_t kLanes = 16;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

KVAUDIT_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
KVAUDIT_INLINE void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// One key panel (2 × 16 keys) per step × Rows query rows = 2·Rows independent accumulators, each
// a sum over e in order.
template <std::size_t Rows>
KVAUDIT_INLINE void score_rows(const float* queries, std::size_t query_stride,
                               const float* key_panels, std::size_t first_key, std::size_t columns,
                               std::size_t dim, float* scores, std::size_t score_stride) {
  static_assert(kKeyPanel == 2 * kLanes);
  const float* q0 = queries;
  const float* q1 = queries + (Rows > 1 ? query_stride : 0);
  const float* q2 = queries + (Rows > 2 ? 2 * query_stride : 0);
  const float* q3 = queries + (Rows > 3 ? 3 * query_stride : 0);
  for (std::size_t j0 = 0; j0 < columns; j0 += kKeyPanel) {
    const float* panel = key_panels + (first_key + j0) / kKeyPanel * dim * kKeyPanel;
    Vec a0{}, b0{}, a1{}, b1{}, a2{}, b2{}, a3{}, b3{};
    for (std::size_t e = 0; e < dim; ++e) {
      const Vec ka = load(panel + e * kKeyPanel);
      const Vec kb = load(panel + e * kKeyPanel + kLanes);
      a0 += q0[e] * ka;
      b0 += q0[e] * kb;
      if constexpr (Rows > 1) {
        a1 += q1[e] * ka;
        b1 += q1[e] * kb;
      }
      if constexpr (Rows > 2) {
        a2 += q2[e] * ka;
        b2 += q2[e] * kb;
      }
      if constexpr (Rows > 3) {
        a3 += q3[e] * ka;
        b3 += q3[e] * kb;
      }
    }
    store(scores + j0, a0);
    store(scores + j0 + kLanes, b0);
    if constexpr (Rows > 1) {
      store(scores + score_stride + j0, a1);
      store(scores + score_stride + j0 + kLanes, b1);
    }
    if constexpr (Rows > 2) {
      store(scores + 2 * score_stride + j0, a2);
      store(scores + 2 * score_stride + j0 + kLanes, b2);
    }
    if constexpr (Rows > 3) {
      store(scores + 3 * score_stride + j0, a3);
      store(scores + 3 * score_stride + j0 + kLanes, b3);
    }
  }
}

// Each 16-wide slice of the head dimension: Rows accumulators, a sum over j in order; the
// dim % 16 tail elementwise (same order).
template <std::size_t Rows>
KVAUDIT_INLINE void accumulate_rows(const float* weights, std::size_t weight_stride,
                                    const float* values, std::size_t begin, std::size_t end,
                                    std::size_t dim, float* accumulators,
                                    std::size_t accumulator_stride) {
  const float* w0 = weights;
  const float* w1 = weights + (Rows > 1 ? weight_stride : 0);
  const float* w2 = weights + (Rows > 2 ? 2 * weight_stride : 0);
  const float* w3 = weights + (Rows > 3 ? 3 * weight_stride : 0);
  std::size_t d0 = 0;
  for (; d0 + kLanes <= dim; d0 += kLanes) {
    Vec a0 = load(accumulators + d0);
    Vec a1 = Rows > 1 ? load(accumulators + accumulator_stride + d0) : Vec{};
    Vec a2 = Rows > 2 ? load(accumulators + 2 * accumulator_stride + d0) : Vec{};
    Vec a3 = Rows > 3 ? load(accumulators + 3 * accumulator_stride + d0) : Vec{};
    for (std::size_t j = begin; j < end; ++j) {
      const Vec v = load(values + j * dim + d0);
      a0 += w0[j] * v;
      if constexpr (Rows > 1) a1 += w1[j] * v;
      if constexpr (Rows > 2) a2 += w2[j] * v;
      if constexpr (Rows > 3) a3 += w3[j] * v;
    }
    store(accumulators + d0, a0);
    if constexpr (Rows > 1) store(accumulators + accumulator_stride + d0, a1);
    if constexpr (Rows > 2) store(accumulators + 2 * accumulator_stride + d0, a2);
    if constexpr (Rows > 3) store(accumulators + 3 * accumulator_stride + d0, a3);
  }
  for (std::size_t d = d0; d < dim; ++d) {
    for (std::size_t r = 0; r < Rows; ++r) {
      const float* w = weights + r * weight_stride;
      float a = accumulators[r * accumulator_stride + d];
      for (std::size_t j = begin; j < end; ++j) a += w[j] * values[j * dim + d];
      accumulators[r * accumulator_stride + d] = a;
    }
  }
}

// f32 → nearest bf16 (ties to even), kept in f32; branch-free so loops vectorize. Same values as
// model::round_to_bf16 (NaN stays NaN).
KVAUDIT_INLINE float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const std::uint32_t nan = (u | 0x00400000u) & 0xffff0000u;
  const std::uint32_t bits = (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  float y;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

// exp for the softmax, vectorizable (libm's expf is a call per element): Cody–Waite reduction
// x = n·ln2 + r (|r| ≤ ln2/2, ln2 split in two parts) and the Cephes expf degree-5 minimax
// polynomial; relative error ~1e-7 (1–2 ulp, like the 1-ulp SLEEF exp PyTorch uses on CPU).
// Arguments below −87.3 give 0 (they only occur as exp(s − max) of negligible keys); NaN stays NaN.
KVAUDIT_INLINE float exp_polynomial(float r) {  // e^r for |r| ≤ 0.35
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * z + r + 1.0f;
}

KVAUDIT_INLINE float scale_by_power_of_two(float value, float n) {  // value · 2^n, n ∈ [−126, 127]
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float power;
  std::memcpy(&power, &bits, sizeof power);
  return value * power;
}

// Round to the nearest integer (|t| < 2^22) without a libm call: adding and removing 1.5·2^23.
KVAUDIT_INLINE float round_to_integer(float t) {
  constexpr float kShifter = 12582912.0f;
  return (t + kShifter) - kShifter;
}

KVAUDIT_INLINE float vector_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = round_to_integer(clamped * 1.44269504088896341f);
  const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
  const float y = scale_by_power_of_two(exp_polynomial(r), n);
  return x < -87.0f ? 0.0f : (x != x ? x : y);
}

// 2^y = 2^n · e^(f·ln2), n = round(y), f = y − n exact.
KVAUDIT_INLINE float vector_exp2(float y) {
  const float clamped = y < -126.0f ? -126.0f : (y > 127.0f ? 127.0f : y);
  const float n = round_to_integer(clamped);
  const float f = clamped - n;
  const float result = scale_by_power_of_two(exp_polynomial(f * 0.693147180559945309f), n);
  return y < -126.0f ? 0.0f : (y != y ? y : result);
}

template <bool Bf16>
KVAUDIT_INLINE float maybe_round(float x) {
  if constexpr (Bf16) {
    return round_bf16(x);
  } else {
    return x;
  }
}

template <bool Bf16>
KVAUDIT_INLINE void eager_row(float* s, std::size_t count, float scale) {
  float max_score = -std::numeric_limits<float>::infinity();
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = maybe_round<Bf16>(maybe_round<Bf16>(s[j]) * scale);
#pragma omp simd reduction(max : max_score)
  for (std::size_t j = 0; j < count; ++j) max_score = s[j] > max_score ? s[j] : max_score;
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = vector_exp(s[j] - max_score);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::size_t j = 0; j < count; ++j) sum += s[j];
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = maybe_round<Bf16>(s[j] / sum);
}

template <bool Bf16>
KVAUDIT_INLINE float online_row(float* s, std::size_t count, float scale_log2, float& running_max,
                                float& running_sum) {
  float block_max = running_max;
#pragma omp simd reduction(max : block_max)
  for (std::size_t j = 0; j < count; ++j) block_max = s[j] > block_max ? s[j] : block_max;
  const float max_scaled = block_max * scale_log2;
  const float correction = running_max == -std::numeric_limits<float>::infinity()
                               ? 0.0f
                               : vector_exp2(running_max * scale_log2 - max_scaled);
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = vector_exp2(s[j] * scale_log2 - max_scaled);
  float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
  for (std::size_t j = 0; j < count; ++j) block_sum += s[j];
  if constexpr (Bf16) {
#pragma omp simd
    for (std::size_t j = 0; j < count; ++j) s[j] = round_bf16(s[j]);
  }
  running_sum = running_sum * correction + block_sum;
  running_max = block_max;
  return correction;
}

}  // namespace

KVAUDIT_VECTOR_CLONES
void eager_probabilities(float* scores, std::size_t count, float scale, bool bf16) {
  if (bf16) {
    eager_row<true>(scores, count, scale);
  } else {
    eager_row<false>(scores, count, scale);
  }
}

KVAUDIT_VECTOR_CLONES
float online_softmax_block(float* scores, std::size_t count, float scale_log2, bool bf16,
                           float& running_max, float& running_sum) {
  return bf16 ? online_row<true>(scores, count, scale_log2, running_max, running_sum)
              : online_row<false>(scores, count, scale_log2, running_max, running_sum);
}

std::size_t padded_key_count(std::size_t count) {
  return (count + kKeyPanel - 1) / kKeyPanel * kKeyPanel;
}

KVAUDIT_VECTOR_CLONES
void score_tile(const float* queries, std::size_t query_stride, std::size_t rows,
                const float* key_panels, std::size_t first_key, std::size_t columns,
                std::size_t dim, float* scores, std::size_t score_stride) {
  switch (rows) {
    case 1:
      return score_rows<1>(queries, query_stride, key_panels, first_key, columns, dim, scores,
                           score_stride);
    case 2:
      return score_rows<2>(queries, query_stride, key_panels, first_key, columns, dim, scores,
                           score_stride);
    case 3:
      return score_rows<3>(queries, query_stride, key_panels, first_key, columns, dim, scores,
                           score_stride);
    default:
      return score_rows<4>(queries, query_stride, key_panels, first_key, columns, dim, scores,
                           score_stride);
  }
}

KVAUDIT_VECTOR_CLONES
void accumulate_tile(const float* weights, std::size_t weight_stride, std::size_t rows,
                     const float* values, std::size_t begin, std::size_t end, std::size_t dim,
                     float* accumulators, std::size_t accumulator_stride) {
  switch (rows) {
    case 1:
      return accumulate_rows<1>(weights, weight_stride, values, begin, end, dim, accumulators,
                                accumulator_stride);
    case 2:
      return accumulate_rows<2>(weights, weight_stride, values, begin, end, dim, accumulators,
                                accumulator_stride);
    case 3:
      return accumulate_rows<3>(weights, weight_stride, values, begin, end, dim, accumulators,
                                accumulator_stride);
    default:
      return accumulate_rows<4>(weights, weight_stride, values, begin, end, dim, accumulators,
                                accumulator_stride);
  }
}

}  // namespace kvaudit::cpu
