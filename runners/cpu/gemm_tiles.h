// The register tiles of the CPU engine's GEMMs (internal to runners/cpu: linear.cpp and
// linear_bf16.cpp). One tile computes, for r < rows and outputs o < 16·blocks (the last block
// possibly partial),
//   y[r][o] = fma(x[r][S−1], w[S−1][o], … fma(x[r][1], w[1][o], fma(x[r][0], w[0][o], y0)) …)
// with y0 = 0, or the value already in y when load_y (a later block of steps, continuing the same
// chain: fp32 stored and reloaded is exact). The chain over steps s is sequential and fused; the
// tile shape, the instruction-set level and the thread never change it, so every level gives the
// same bits (docs/design/numerics.md §Canonical evaluation order).
#pragma once

#include <cstddef>

#include "runners/cpu/cpu_isa.h"

namespace kvaudit::cpu::tiles {

inline constexpr int kBlock = 16;  // outputs per block (one 16-lane vector)

struct TileArgs {
  const float* x;            // the tile's first row, first step
  std::size_t x_stride;      // floats from one row of x to the next
  const float* w;            // the first block's first step
  std::size_t block_stride;  // floats from one block of 16 outputs to the next
  std::size_t step_stride;   // floats from one step to the next (within a block)
  int steps;                 // S
  float* y;                  // the tile's first row and output
  std::size_t y_stride;
  int last_block_outputs;  // valid outputs of the last block (1..16)
  bool load_y;
};

// A level's tiles: run(a, rows, blocks) for 1 ≤ rows ≤ max_rows and 1 ≤ blocks ≤ max_blocks. The
// weights of every block must hold 16 readable floats per step (zero padding past the outputs).
struct TileKernel {
  int max_rows;
  int max_blocks;
  void (*run)(const TileArgs& a, int rows, int blocks);
};

// The tiles of `isa` (avx512bf16 has avx512's f32 tiles).
const TileKernel& tile_kernel(CpuIsa isa);

}  // namespace kvaudit::cpu::tiles
