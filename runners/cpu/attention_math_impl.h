// The attention inner loops of attention_math.h, written once over simd16_impl.h's V (no include
// guard: attention_math.cpp includes it once per instruction-set level, inside that level's
// namespace, after simd16_impl.h and with KVAUDIT_SIMD_TARGET defined). Every multiply-add that
// the order fuses is written as fma(); every sum of many terms goes through 16 lanes and hsum's
// tree; element-wise steps are plain IEEE operations. So each level computes the same bits.

// One key panel (2 × 16 keys) per step × Rows query rows = 2·Rows accumulators, each key's score a
// fused chain over e in order.
template <std::size_t Rows>
KVAUDIT_SIMD_FN void score_rows(const float* queries, std::size_t query_stride,
                                const float* key_panels, std::size_t first_key, std::size_t columns,
                                std::size_t dim, float* scores, std::size_t score_stride) {
  static_assert(kKeyPanel == 32);
  for (std::size_t j0 = 0; j0 < columns; j0 += kKeyPanel) {
    const float* panel = key_panels + (first_key + j0) / kKeyPanel * dim * kKeyPanel;
    V a[Rows], b[Rows];
    for (std::size_t r = 0; r < Rows; ++r) a[r] = b[r] = zero();
    for (std::size_t e = 0; e < dim; ++e) {
      const V ka = load(panel + e * kKeyPanel);
      const V kb = load(panel + e * kKeyPanel + 16);
      for (std::size_t r = 0; r < Rows; ++r) {
        const V q = broadcast(queries[r * query_stride + e]);
        a[r] = fma(q, ka, a[r]);
        b[r] = fma(q, kb, b[r]);
      }
    }
    for (std::size_t r = 0; r < Rows; ++r) {
      store(scores + r * score_stride + j0, a[r]);
      store(scores + r * score_stride + j0 + 16, b[r]);
    }
  }
}

// Each 16-wide slice of the head dimension: Rows accumulators, a fused chain over j in order; the
// dim % 16 tail element by element (same chain).
template <std::size_t Rows>
KVAUDIT_SIMD_FN void accumulate_rows(const float* weights, std::size_t weight_stride,
                                     const float* values, std::size_t begin, std::size_t end,
                                     std::size_t dim, float* accumulators,
                                     std::size_t accumulator_stride) {
  std::size_t d0 = 0;
  for (; d0 + 16 <= dim; d0 += 16) {
    V a[Rows];
    for (std::size_t r = 0; r < Rows; ++r) a[r] = load(accumulators + r * accumulator_stride + d0);
    for (std::size_t j = begin; j < end; ++j) {
      const V v = load(values + j * dim + d0);
      for (std::size_t r = 0; r < Rows; ++r)
        a[r] = fma(broadcast(weights[r * weight_stride + j]), v, a[r]);
    }
    for (std::size_t r = 0; r < Rows; ++r) store(accumulators + r * accumulator_stride + d0, a[r]);
  }
  for (std::size_t d = d0; d < dim; ++d) {
    for (std::size_t r = 0; r < Rows; ++r) {
      const float* w = weights + r * weight_stride;
      float a = accumulators[r * accumulator_stride + d];
      for (std::size_t j = begin; j < end; ++j) a = std::fma(w[j], values[j * dim + d], a);
      accumulators[r * accumulator_stride + d] = a;
    }
  }
}

// Σ x[j] over j < count: lane l sums the x[j] with j mod 16 = l in order, then hsum's tree.
KVAUDIT_SIMD_FN float sum16(const float* x, std::size_t count) {
  V acc = zero();
  std::size_t j = 0;
  for (; j + 16 <= count; j += 16) acc = add(acc, load(x + j));
  if (j < count) acc = add(acc, load_first(x + j, static_cast<int>(count - j)));
  return hsum(acc);
}

// f32 → nearest bf16 (ties to even), kept in f32; branch-free so loops vectorize. Same values as
// model::round_to_bf16 (NaN stays NaN).
KVAUDIT_SIMD_FN float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const std::uint32_t nan = (u | 0x00400000u) & 0xffff0000u;
  const std::uint32_t bits = (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  float y;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

// exp for the softmax, vectorizable (libm's expf is a call per element, and its variants differ
// between CPUs): Cody–Waite reduction x = n·ln2 + r (|r| ≤ ln2/2, ln2 split in two parts, each
// step fused) and the Cephes expf degree-5 minimax polynomial in fused Horner form; relative error
// ~1e-7 (1–2 ulp, like the 1-ulp SLEEF exp PyTorch uses on CPU). Arguments below −87 give 0 (they
// only occur as exp(s − max) of negligible keys); NaN stays NaN.
KVAUDIT_SIMD_FN float exp_polynomial(float r) {  // e^r for |r| ≤ 0.35
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  return std::fma(p, z, r) + 1.0f;
}

KVAUDIT_SIMD_FN float scale_by_power_of_two(float value, float n) {  // value · 2^n, n ∈ [−126, 127]
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float power;
  std::memcpy(&power, &bits, sizeof power);
  return value * power;
}

// Round to the nearest integer (|t| < 2^22) without a libm call: adding and removing 1.5·2^23.
KVAUDIT_SIMD_FN float round_to_integer(float t) {
  constexpr float kShifter = 12582912.0f;
  return (t + kShifter) - kShifter;
}

KVAUDIT_SIMD_FN float vector_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = round_to_integer(clamped * 1.44269504088896341f);
  const float r = std::fma(-n, -2.12194440e-4f, std::fma(-n, 0.693359375f, clamped));
  const float y = scale_by_power_of_two(exp_polynomial(r), n);
  return x < -87.0f ? 0.0f : (x != x ? x : y);
}

// 2^y = 2^n · e^(f·ln2), n = round(y), f = y − n exact.
KVAUDIT_SIMD_FN float vector_exp2(float y) {
  const float clamped = y < -126.0f ? -126.0f : (y > 127.0f ? 127.0f : y);
  const float n = round_to_integer(clamped);
  const float f = clamped - n;
  const float result = scale_by_power_of_two(exp_polynomial(f * 0.693147180559945309f), n);
  return y < -126.0f ? 0.0f : (y != y ? y : result);
}

template <bool Bf16>
KVAUDIT_SIMD_FN float maybe_round(float x) {
  if constexpr (Bf16) {
    return round_bf16(x);
  } else {
    return x;
  }
}

template <bool Bf16>
KVAUDIT_SIMD_FN void eager_row(float* s, std::size_t count, float scale) {
  float max_score = -std::numeric_limits<float>::infinity();
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = maybe_round<Bf16>(maybe_round<Bf16>(s[j]) * scale);
  for (std::size_t j = 0; j < count; ++j) max_score = s[j] > max_score ? s[j] : max_score;
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = vector_exp(s[j] - max_score);
  const float sum = sum16(s, count);
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j) s[j] = maybe_round<Bf16>(s[j] / sum);
}

template <bool Bf16>
KVAUDIT_SIMD_FN float online_row(float* s, std::size_t count, float scale_log2, float& running_max,
                                 float& running_sum) {
  float block_max = running_max;
  for (std::size_t j = 0; j < count; ++j) block_max = s[j] > block_max ? s[j] : block_max;
  const float max_scaled = block_max * scale_log2;
  const float correction = running_max == -std::numeric_limits<float>::infinity()
                               ? 0.0f
                               : vector_exp2(std::fma(running_max, scale_log2, -max_scaled));
#pragma omp simd
  for (std::size_t j = 0; j < count; ++j)
    s[j] = vector_exp2(std::fma(s[j], scale_log2, -max_scaled));
  const float block_sum = sum16(s, count);
  if constexpr (Bf16) {
#pragma omp simd
    for (std::size_t j = 0; j < count; ++j) s[j] = round_bf16(s[j]);
  }
  running_sum = std::fma(running_sum, correction, block_sum);
  running_max = block_max;
  return correction;
}

KVAUDIT_SIMD_TARGET void eager_probabilities_at(float* scores, std::size_t count, float scale,
                                                bool bf16) {
  if (bf16) {
    eager_row<true>(scores, count, scale);
  } else {
    eager_row<false>(scores, count, scale);
  }
}

KVAUDIT_SIMD_TARGET float online_softmax_block_at(float* scores, std::size_t count,
                                                  float scale_log2, bool bf16, float& running_max,
                                                  float& running_sum) {
  return bf16 ? online_row<true>(scores, count, scale_log2, running_max, running_sum)
              : online_row<false>(scores, count, scale_log2, running_max, running_sum);
}

KVAUDIT_SIMD_TARGET void score_tile_at(const float* queries, std::size_t query_stride,
                                       std::size_t rows, const float* key_panels,
                                       std::size_t first_key, std::size_t columns, std::size_t dim,
                                       float* scores, std::size_t score_stride) {
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

KVAUDIT_SIMD_TARGET void accumulate_tile_at(const float* weights, std::size_t weight_stride,
                                            std::size_t rows, const float* values,
                                            std::size_t begin, std::size_t end, std::size_t dim,
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
