// 16 fp32 lanes with one set of semantics at every instruction-set level (no include guard: a
// kernel file includes it once per level, inside that level's namespace, after defining
//   KVAUDIT_SIMD_LEVEL  0 scalar, 1 avx2 (two ymm), 2 avx512 (one zmm)
//   KVAUDIT_SIMD_FN     the function attributes of that level (target + always_inline)
// and including <immintrin.h>, <cmath>, <cstdint> and <cstring> beforehand).
//
// Every operation is lane-wise IEEE fp32 (round to nearest even, under whatever MXCSR says) except
// hsum, which adds the 16 lanes by one fixed tree: s8[i] = l[i] + l[i+8], s4[i] = s8[i] + s8[i+4],
// s2[i] = s4[i] + s4[i+2], s2[0] + s2[1]. fma is a fused multiply-add at every level (std::fma in
// scalar code), so a level changes speed, never bits (docs/design/numerics.md §Canonical evaluation
// order).

#if !defined(KVAUDIT_SIMD_LEVEL) || !defined(KVAUDIT_SIMD_FN)
#error "define KVAUDIT_SIMD_LEVEL and KVAUDIT_SIMD_FN before including simd16_impl.h"
#endif

#if KVAUDIT_SIMD_LEVEL == 2

struct V {
  __m512 v;
};
KVAUDIT_SIMD_FN V zero() { return {_mm512_setzero_ps()}; }
KVAUDIT_SIMD_FN V load(const float* p) { return {_mm512_loadu_ps(p)}; }
KVAUDIT_SIMD_FN void store(float* p, V a) { _mm512_storeu_ps(p, a.v); }
KVAUDIT_SIMD_FN V broadcast(float s) { return {_mm512_set1_ps(s)}; }
KVAUDIT_SIMD_FN V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
KVAUDIT_SIMD_FN V add(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
KVAUDIT_SIMD_FN V mul(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
// bf16 pairs (16 uint32 lanes, w[2p] in the low half, w[2p+1] in the high half) widened to fp32:
// the high halves and the low halves. Bit moves only.
KVAUDIT_SIMD_FN V bf16_high(const std::uint32_t* p) {
  const __m512i u = _mm512_loadu_si512(p);
  return {_mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32(-65536)))};
}
KVAUDIT_SIMD_FN V bf16_low(const std::uint32_t* p) {
  // (maskz_ with every lane: GCC 12's plain form trips -Wmaybe-uninitialized)
  return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_loadu_si512(p), 16))};
}
KVAUDIT_SIMD_FN float hsum(V a) {
  alignas(64) float lanes[16];  // (through memory: GCC 12's 512→256 extracts trip
  _mm512_store_ps(lanes, a.v);  //  -Wmaybe-uninitialized on their pass-through operand)
  const __m256 s8 = _mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

#elif KVAUDIT_SIMD_LEVEL == 1

struct V {
  __m256 lo, hi;  // lanes 0-7, 8-15
};
KVAUDIT_SIMD_FN V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
KVAUDIT_SIMD_FN V load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
KVAUDIT_SIMD_FN void store(float* p, V a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
KVAUDIT_SIMD_FN V broadcast(float s) { return {_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
KVAUDIT_SIMD_FN V fma(V a, V b, V c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
KVAUDIT_SIMD_FN V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
KVAUDIT_SIMD_FN V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
KVAUDIT_SIMD_FN V bf16_high(const std::uint32_t* p) {
  const __m256i mask = _mm256_set1_epi32(-65536);
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  return {_mm256_castsi256_ps(_mm256_and_si256(lo, mask)),
          _mm256_castsi256_ps(_mm256_and_si256(hi, mask))};
}
KVAUDIT_SIMD_FN V bf16_low(const std::uint32_t* p) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)),
          _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
}
KVAUDIT_SIMD_FN float hsum(V a) {
  const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

#elif KVAUDIT_SIMD_LEVEL == 0

struct V {
  float l[16];
};
KVAUDIT_SIMD_FN V zero() {
  V r;
  for (int i = 0; i < 16; ++i) r.l[i] = 0.0f;
  return r;
}
KVAUDIT_SIMD_FN V load(const float* p) {
  V r;
  std::memcpy(r.l, p, sizeof r.l);
  return r;
}
KVAUDIT_SIMD_FN void store(float* p, V a) { std::memcpy(p, a.l, sizeof a.l); }
KVAUDIT_SIMD_FN V broadcast(float s) {
  V r;
  for (int i = 0; i < 16; ++i) r.l[i] = s;
  return r;
}
KVAUDIT_SIMD_FN V fma(V a, V b, V c) {
  V r;
  for (int i = 0; i < 16; ++i) r.l[i] = std::fma(a.l[i], b.l[i], c.l[i]);
  return r;
}
KVAUDIT_SIMD_FN V add(V a, V b) {
  V r;
  for (int i = 0; i < 16; ++i) r.l[i] = a.l[i] + b.l[i];
  return r;
}
KVAUDIT_SIMD_FN V mul(V a, V b) {
  V r;
  for (int i = 0; i < 16; ++i) r.l[i] = a.l[i] * b.l[i];
  return r;
}
KVAUDIT_SIMD_FN V bf16_high(const std::uint32_t* p) {
  V r;
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t bits = p[i] & 0xffff0000u;
    std::memcpy(&r.l[i], &bits, sizeof bits);
  }
  return r;
}
KVAUDIT_SIMD_FN V bf16_low(const std::uint32_t* p) {
  V r;
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t bits = p[i] << 16;
    std::memcpy(&r.l[i], &bits, sizeof bits);
  }
  return r;
}
KVAUDIT_SIMD_FN float hsum(V a) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = a.l[i] + a.l[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  const float s2_0 = s4[0] + s4[2];
  const float s2_1 = s4[1] + s4[3];
  return s2_0 + s2_1;
}

#else
#error "KVAUDIT_SIMD_LEVEL must be 0, 1 or 2"
#endif

// The first n lanes of p (n ≤ 16), the rest 0.
KVAUDIT_SIMD_FN V load_first(const float* p, int n) {
  float lanes[16] = {};
  for (int i = 0; i < n; ++i) lanes[i] = p[i];
  return load(lanes);
}
// Stores the first n lanes (n ≤ 16).
KVAUDIT_SIMD_FN void store_first(float* p, V a, int n) {
  float lanes[16];
  store(lanes, a);
  for (int i = 0; i < n; ++i) p[i] = lanes[i];
}
