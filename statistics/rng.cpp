// Philox4x32-10 (Random123) and the bootstrap index stream; the layout is documented in rng.h.
// draw_resample_indices evaluates sixteen counters per step with AVX2 where the CPU has it (checked
// once at run time); the rounds are Random123's, so the words and indices are the scalar ones.
#include "statistics/rng.h"

#include <Random123/philox.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(KVAUDIT_NO_AVX2)
#include <immintrin.h>
#endif

namespace kvaudit::stats {
namespace {

inline r123::Philox4x32_R<10>::ctr_type philox(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                               std::uint32_t c3, const PhiloxKey& key) {
  const r123::Philox4x32_R<10> generator;
  const r123::Philox4x32_R<10>::ctr_type counter = {{c0, c1, c2, c3}};
  const r123::Philox4x32_R<10>::key_type k = {{key[0], key[1]}};
  return generator(counter, k);
}

inline std::uint64_t join(std::uint32_t low, std::uint32_t high) {
  return (static_cast<std::uint64_t>(high) << 32) | low;
}

}  // namespace

PhiloxBlock philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key) {
  const auto r = philox(counter[0], counter[1], counter[2], counter[3], key);
  return {r.v[0], r.v[1], r.v[2], r.v[3]};
}

std::array<std::uint64_t, 2> philox_words(std::uint64_t seed, std::uint32_t replicate,
                                          std::uint32_t pair, std::uint32_t stratum,
                                          RandomPurpose purpose) {
  const auto r =
      philox(replicate, pair, stratum, static_cast<std::uint32_t>(purpose), philox_key(seed));
  return {join(r.v[0], r.v[1]), join(r.v[2], r.v[3])};
}

namespace {

void draw_resample_indices_scalar(std::uint64_t seed, std::uint32_t stratum,
                                  std::uint32_t replicate, std::uint32_t tag, std::uint32_t size,
                                  std::uint32_t* indices) {
  const PhiloxKey key = philox_key(seed);
  const std::uint32_t pairs = size / 2;
  for (std::uint32_t p = 0; p < pairs; ++p) {
    const auto r = philox(replicate, p, stratum, tag, key);
    indices[2 * p] = static_cast<std::uint32_t>(draw_index(join(r.v[0], r.v[1]), size));
    indices[2 * p + 1] = static_cast<std::uint32_t>(draw_index(join(r.v[2], r.v[3]), size));
  }
  if (size % 2 != 0) {
    const auto r = philox(replicate, pairs, stratum, tag, key);
    indices[size - 1] = static_cast<std::uint32_t>(draw_index(join(r.v[0], r.v[1]), size));
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(KVAUDIT_NO_AVX2)
#define KVAUDIT_PHILOX_AVX2 1

// The high and low 32 bits of the eight products m · x_l (lanes l = 0…7).
__attribute__((target("avx2"))) inline void mulhilo8(__m256i m, __m256i x, __m256i& hi,
                                                     __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(x, m);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);  // lanes 1, 3, 5, 7
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xaa);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa);
}

// Eight Philox4x32 states (x0…x3 of counters l = 0…7 in 32-bit lanes).
struct PhiloxLanes {
  __m256i x0, x1, x2, x3;
};

__attribute__((target("avx2"))) inline PhiloxLanes philox_lanes(std::uint32_t replicate,
                                                                std::uint32_t first_block,
                                                                std::uint32_t stratum,
                                                                std::uint32_t tag) {
  return {_mm256_set1_epi32(static_cast<int>(replicate)),
          _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first_block)),
                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
          _mm256_set1_epi32(static_cast<int>(stratum)), _mm256_set1_epi32(static_cast<int>(tag))};
}

// One round of Random123's _philox4x32round: (hi0, lo0) = M0·x0, (hi1, lo1) = M1·x2,
// x ← (hi1 ⊕ x1 ⊕ k0, lo1, hi0 ⊕ x3 ⊕ k1, lo0).
__attribute__((target("avx2"))) inline void philox_round(PhiloxLanes& s, __m256i k0, __m256i k1) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));  // PHILOX_M4x32_0
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));  // PHILOX_M4x32_1
  __m256i hi0, lo0, hi1, lo1;
  mulhilo8(m0, s.x0, hi0, lo0);
  mulhilo8(m1, s.x2, hi1, lo1);
  s.x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, s.x1), k0);
  s.x1 = lo1;
  s.x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, s.x3), k1);
  s.x3 = lo0;
}

// indices of blocks first_block … first_block + 7 (those below ⌈size/2⌉; odd size: the last
// block gives one index, from its first word).
__attribute__((target("avx2"))) inline void store_indices(const PhiloxLanes& s,
                                                          std::uint32_t first_block,
                                                          std::uint32_t size,
                                                          std::uint32_t* indices) {
  alignas(32) std::uint32_t w[4][8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w[0]), s.x0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(w[1]), s.x1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(w[2]), s.x2);
  _mm256_store_si256(reinterpret_cast<__m256i*>(w[3]), s.x3);
  const std::uint64_t first = 2 * std::uint64_t{first_block};  // lane 0's even index
  for (std::uint64_t l = 0; l < 8 && first + 2 * l < size; ++l) {
    indices[first + 2 * l] = static_cast<std::uint32_t>(draw_index(join(w[0][l], w[1][l]), size));
    if (first + 2 * l + 1 < size) {
      indices[first + 2 * l + 1] =
          static_cast<std::uint32_t>(draw_index(join(w[2][l], w[3][l]), size));
    }
  }
}

// Philox4x32-10 on the counters (replicate, block, stratum, tag) for every block < ⌈size/2⌉,
// eight blocks per vector and two vectors per step (the rounds are a latency chain; two
// independent chains keep the multiplier busy). The key schedule is Random123's: round r uses
// (k0 + r·PHILOX_W32_0, k1 + r·PHILOX_W32_1). Lanes past the last block are computed and dropped.
__attribute__((target("avx2"))) void draw_resample_indices_avx2(
    std::uint64_t seed, std::uint32_t stratum, std::uint32_t replicate, std::uint32_t tag,
    std::uint32_t size, std::uint32_t* indices) {
  const std::uint32_t blocks = size / 2 + size % 2;
  const auto key0 = static_cast<std::uint32_t>(seed & 0xffffffffu);
  const auto key1 = static_cast<std::uint32_t>(seed >> 32);
  std::uint32_t p = 0;
  for (; blocks - p > 8; p += 16) {
    PhiloxLanes a = philox_lanes(replicate, p, stratum, tag);
    PhiloxLanes b = philox_lanes(replicate, p + 8, stratum, tag);
    std::uint32_t k0 = key0;
    std::uint32_t k1 = key1;
    for (int round = 0; round < 10; ++round) {
      const __m256i k0v = _mm256_set1_epi32(static_cast<int>(k0));
      const __m256i k1v = _mm256_set1_epi32(static_cast<int>(k1));
      philox_round(a, k0v, k1v);
      philox_round(b, k0v, k1v);
      k0 += 0x9E3779B9u;  // PHILOX_W32_0
      k1 += 0xBB67AE85u;  // PHILOX_W32_1
    }
    store_indices(a, p, size, indices);
    store_indices(b, p + 8, size, indices);
    if (blocks - p <= 16) return;
  }
  if (p < blocks) {
    PhiloxLanes a = philox_lanes(replicate, p, stratum, tag);
    std::uint32_t k0 = key0;
    std::uint32_t k1 = key1;
    for (int round = 0; round < 10; ++round) {
      philox_round(a, _mm256_set1_epi32(static_cast<int>(k0)),
                   _mm256_set1_epi32(static_cast<int>(k1)));
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    store_indices(a, p, size, indices);
  }
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

void draw_resample_indices(std::uint64_t seed, std::uint32_t stratum, std::uint32_t replicate,
                           RandomPurpose purpose, std::uint32_t size, std::uint32_t* indices) {
  const auto tag = static_cast<std::uint32_t>(purpose);
#ifdef KVAUDIT_PHILOX_AVX2
  if (size >= 6 && cpu_has_avx2()) {  // below 3 blocks the scalar loop is as fast
    draw_resample_indices_avx2(seed, stratum, replicate, tag, size, indices);
    return;
  }
#endif
  draw_resample_indices_scalar(seed, stratum, replicate, tag, size, indices);
}

}  // namespace kvaudit::stats
