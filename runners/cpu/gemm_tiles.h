// The register tiles of the CPU engine's GEMMs (internal to runners/cpu: linear.cpp and
// linear_bf16.cpp). One tile computes, for r < rows and outputs o < 16·blocks (the last block
// possibly partial),
//   y[r][o] = fma(x[r][S−1], w[S−1][o], … fma(x[r][1], w[1][o], fma(x[r][0], w[0][o], y0)) …)
// with y0 = 0, or the value already in y when load_y (a later block of steps, continuing the same
// chain: fp32 stored and reloaded is exact). The chain over steps s is sequential and fused; the
// tile shape, the instruction-set level and the thread never change it, so every level gives the
// same bits (docs/design/numerics.md §Canonical evaluation order).
//
// The bf16 tiles run the same chains on PackedBf16Weight's pairs (linear_bf16.h), widened to fp32
// in registers in VDPBF16PS's order: step 2p takes the pair's high half w[2p+1] and x's step 2p
// (x widened by widen_rows_to_bf16 holds x[2p+1] there), step 2p+1 the low half w[2p].
#pragma once

#include <cstddef>
#include <cstdint>

#include "runners/cpu/cpu_isa.h"

namespace kvaudit::cpu::tiles {

inline constexpr int kBlock = 16;  // outputs per block (one 16-lane vector)

struct TileArgs {
  const float* x;              // the tile's first row, first step
  std::size_t x_stride;        // floats from one row of x to the next
  const float* w;              // f32 tiles: the first block's first step
  const std::uint32_t* pairs;  // bf16 tiles: the first block's first pair (steps 0 and 1)
  std::size_t block_stride;    // elements (float or uint32) from one block of 16 to the next
  std::size_t step_stride;     // f32: from one step to the next; bf16: from one pair to the next
  int steps;                   // S (even for the bf16 tiles)
  float* y;                    // the tile's first row and output
  std::size_t y_stride;
  int last_block_outputs;  // valid outputs of the last block (1..16)
  bool load_y;
};

// A level's tiles: run(a, rows, blocks) for 1 ≤ rows ≤ max_rows and 1 ≤ blocks ≤ max_blocks. The
// weights of every block must hold 16 readable floats per step (zero padding past the outputs).
struct TileKernel {
  int max_rows;
  int max_blocks;
  void (*run)(const TileArgs& a, int rows, int blocks);       // f32 weights (w)
  void (*run_bf16)(const TileArgs& a, int rows, int blocks);  // packed bf16 pairs (pairs)
  // Pairs [0, count) of `blocks` packed bf16 blocks → an f32 panel for `run`, [blocks][2 × count]
  // [16] (a block's steps together, the high halves first: the bf16 tiles' order).
  void (*widen_bf16_panel)(const std::uint32_t* pairs, std::size_t block_stride, int blocks,
                           int count, float* panel);
};

// The tiles of `isa` (avx512bf16 has avx512's tiles).
const TileKernel& tile_kernel(CpuIsa isa);

}  // namespace kvaudit::cpu::tiles
