// The GEMM register tiles at each instruction-set level; see gemm_tiles.h. gemm_tile_impl.h is
// compiled three times here, each time inside its own anonymous namespace with its level's target
// attributes (function-level, so the library needs no -m flag and no inline function of a shared
// header is compiled for a wider level than the caller's). Compiled alone (unity_build.cmake).
#include "runners/cpu/gemm_tiles.h"

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvaudit::cpu::tiles {

namespace level_scalar {
namespace {
#define KVAUDIT_SIMD_LEVEL 0
#define KVAUDIT_SIMD_FN inline __attribute__((always_inline))
#define KVAUDIT_SIMD_TARGET
constexpr int kMaxRows = 4;
constexpr int kMaxBlocks = 1;
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/gemm_tile_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace level_scalar

namespace level_avx2 {
namespace {
#define KVAUDIT_SIMD_LEVEL 1
#define KVAUDIT_SIMD_FN inline __attribute__((always_inline, target("avx2,fma")))
#define KVAUDIT_SIMD_TARGET __attribute__((target("avx2,fma")))
constexpr int kMaxRows = 6;
constexpr int kMaxBlocks = 1;
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/gemm_tile_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace level_avx2

namespace level_avx512 {
namespace {
#define KVAUDIT_SIMD_LEVEL 2
#define KVAUDIT_SIMD_FN \
  inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define KVAUDIT_SIMD_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
constexpr int kMaxRows = 6;
constexpr int kMaxBlocks = 4;
#include "runners/cpu/simd16_impl.h"
// (the kernels, written over its V)
#include "runners/cpu/gemm_tile_impl.h"
#undef KVAUDIT_SIMD_LEVEL
#undef KVAUDIT_SIMD_FN
#undef KVAUDIT_SIMD_TARGET
}  // namespace
}  // namespace level_avx512

const TileKernel& tile_kernel(CpuIsa isa) {
  static constexpr TileKernel scalar{level_scalar::kMaxRows, level_scalar::kMaxBlocks,
                                     &level_scalar::f32_tile, &level_scalar::bf16_tile,
                                     &level_scalar::widen_bf16_panel};
  static constexpr TileKernel avx2{level_avx2::kMaxRows, level_avx2::kMaxBlocks,
                                   &level_avx2::f32_tile, &level_avx2::bf16_tile,
                                   &level_avx2::widen_bf16_panel};
  static constexpr TileKernel avx512{level_avx512::kMaxRows, level_avx512::kMaxBlocks,
                                     &level_avx512::f32_tile, &level_avx512::bf16_tile,
                                     &level_avx512::widen_bf16_panel};
  switch (isa) {
    case CpuIsa::scalar:
      return scalar;
    case CpuIsa::avx2:
      return avx2;
    case CpuIsa::avx512:
    case CpuIsa::avx512bf16:
      return avx512;
  }
  return scalar;
}

}  // namespace kvaudit::cpu::tiles
