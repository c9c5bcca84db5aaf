// How linear(), linear_bf16() and gemm() walk a product with the register tiles of gemm_tiles.h
// (internal to runners/cpu). For rows [0, rows) of x (row-major, `steps` floats a row at
// x_stride) and outputs [first, first + count) of y, in blocks of rows × 64 outputs × kStepBlock
// steps: `panel(o, s0, sc)` gives the weights of outputs o … o+63 (16-float blocks, zero past the
// last output) for steps s0 … s0+sc−1, and every row tile continues the output's fma chain where
// the previous block of steps left it in y. The order of each output's chain is therefore always
// step 0, 1, …, S−1, whatever the blocking, the tile shape or the level. A panel of packed bf16
// pairs (PanelView::pairs; s0 and sc even) runs on the bf16 tiles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "runners/cpu/gemm_tiles.h"

namespace kvaudit::cpu::tiles {

inline constexpr int kPanelOutputs = 64;  // outputs per panel (4 blocks; the thread slice unit)
inline constexpr int kStepBlock = 256;    // steps per block (a 64-output panel: 64 KiB of f32)
inline constexpr int kRowBlock = 192;     // rows per block (their x for one step block: L2)

struct PanelView {
  const float* w;                        // f32: block 0, step s0
  std::size_t block_stride;              // elements between blocks
  std::size_t step_stride;               // f32: floats between steps; bf16: between pairs
  const std::uint32_t* pairs = nullptr;  // bf16 (TileKernel::run_bf16): block 0, pair s0 / 2
};

template <class Panel>
void run_tiles(const TileKernel& kernel, const float* x, std::size_t x_stride, int rows, int steps,
               int first, int count, float* y, std::size_t y_stride, Panel&& panel) {
  const int end = first + count;
  if (steps <= 0) {
    for (int r = 0; r < rows; ++r) {
      std::fill(y + static_cast<std::size_t>(r) * y_stride + first,
                y + static_cast<std::size_t>(r) * y_stride + end, 0.0f);
    }
    return;
  }
  for (int row_first = 0; row_first < rows; row_first += kRowBlock) {
    const int row_end = std::min(rows, row_first + kRowBlock);
    for (int o = first; o < end; o += kPanelOutputs) {
      const int outputs = std::min(kPanelOutputs, end - o);
      const int blocks = (outputs + kBlock - 1) / kBlock;
      for (int s0 = 0; s0 < steps; s0 += kStepBlock) {
        const int sc = std::min(kStepBlock, steps - s0);
        const PanelView view = panel(o, s0, sc);
        for (int r = row_first; r < row_end; r += kernel.max_rows) {
          const int tile_rows = std::min(kernel.max_rows, row_end - r);
          for (int g = 0; g < blocks; g += kernel.max_blocks) {
            const int tile_blocks = std::min(kernel.max_blocks, blocks - g);
            TileArgs a;
            a.x = x + static_cast<std::size_t>(r) * x_stride + static_cast<std::size_t>(s0);
            a.x_stride = x_stride;
            const std::size_t block_offset = static_cast<std::size_t>(g) * view.block_stride;
            a.w = view.w != nullptr ? view.w + block_offset : nullptr;
            a.pairs = view.pairs != nullptr ? view.pairs + block_offset : nullptr;
            a.block_stride = view.block_stride;
            a.step_stride = view.step_stride;
            a.steps = sc;
            a.y = y + static_cast<std::size_t>(r) * y_stride + static_cast<std::size_t>(o) +
                  static_cast<std::size_t>(g) * kBlock;
            a.y_stride = y_stride;
            a.last_block_outputs =
                g + tile_blocks == blocks ? outputs - (blocks - 1) * kBlock : kBlock;
            a.load_y = s0 > 0;
            (view.pairs != nullptr ? kernel.run_bf16 : kernel.run)(a, tile_rows, tile_blocks);
          }
        }
      }
    }
  }
}

}  // namespace kvaudit::cpu::tiles
