// The attention inner loops at each instruction-set level; see attention_math.h.
// attention_math_impl.h is compiled three times here, each inside its own anonymous namespace with
// its level's target attributes (as gemm_tiles.cpp does), and each public function dispatches on
// active_cpu_isa(). Contraction is off (CMakeLists.txt): the fused multiply-adds are the explicit
// fma() calls. Compiled alone (unity_build.cmake).
#include "runners/cpu/attention_math.h"

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runners/cpu/cpu_isa.h"

namespace kvaudit::cpu {

namespace attention_scalar {
namespace {
#define KVAUDIT_SIMD_LEVEL 0
#define KVAUDIT_SIMD_FN inline __attribute__((always_inline))
#define KVAUDIT_SIMD_TARGET
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/attention_math_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace attention_scalar

namespace attention_avx2 {
namespace {
#define KVAUDIT_SIMD_LEVEL 1
#define KVAUDIT_SIMD_FN inline __attribute__((always_inline, target("avx2,fma")))
#define KVAUDIT_SIMD_TARGET __attribute__((target("avx2,fma")))
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/attention_math_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace attention_avx2

namespace attention_avx512 {
namespace {
#define KVAUDIT_SIMD_LEVEL 2
#define KVAUDIT_SIMD_FN \
  inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define KVAUDIT_SIMD_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/attention_math_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace attention_avx512

// Calls `name` of the active level's namespace.
#define KVAUDIT_AT_LEVEL(name, ...)               \
  switch (active_cpu_isa()) {                     \
    case CpuIsa::scalar:                          \
      return attention_scalar::name(__VA_ARGS__); \
    case CpuIsa::avx2:                            \
      return attention_avx2::name(__VA_ARGS__);   \
    case CpuIsa::avx512:                          \
    case CpuIsa::avx512bf16:                      \
      return attention_avx512::name(__VA_ARGS__); \
  }                                               \
  return attention_scalar::name(__VA_ARGS__)

void eager_probabilities(float* scores, std::size_t count, float scale, bool bf16) {
  KVAUDIT_AT_LEVEL(eager_probabilities_at, scores, count, scale, bf16);
}

float online_softmax_block(float* scores, std::size_t count, float scale_log2, bool bf16,
                           float& running_max, float& running_sum) {
  KVAUDIT_AT_LEVEL(online_softmax_block_at, scores, count, scale_log2, bf16, running_max,
                   running_sum);
}

std::size_t padded_key_count(std::size_t count) {
  return (count + kKeyPanel - 1) / kKeyPanel * kKeyPanel;
}

void score_tile(const float* queries, std::size_t query_stride, std::size_t rows,
                const float* key_panels, std::size_t first_key, std::size_t columns,
                std::size_t dim, float* scores, std::size_t score_stride) {
  KVAUDIT_AT_LEVEL(score_tile_at, queries, query_stride, rows, key_panels, first_key, columns, dim,
                   scores, score_stride);
}

void accumulate_tile(const float* weights, std::size_t weight_stride, std::size_t rows,
                     const float* values, std::size_t begin, std::size_t end, std::size_t dim,
                     float* accumulators, std::size_t accumulator_stride) {
  KVAUDIT_AT_LEVEL(accumulate_tile_at, weights, weight_stride, rows, values, begin, end, dim,
                   accumulators, accumulator_stride);
}

#undef KVAUDIT_AT_LEVEL

}  // namespace kvaudit::cpu
