// The f32 and bf16 register tiles of gemm_tiles.h, written once over simd16_impl.h's V (no include
// guard: gemm_tiles.cpp includes it once per instruction-set level, inside that level's namespace,
// after simd16_impl.h and with KVAUDIT_SIMD_TARGET, kMaxRows ≤ 6 and kMaxBlocks ≤ 4 defined).

// One step of every chain of a tile: acc[r][b] = fma(x[r · x_stride], wv[b], acc[r][b]).
template <int MR, int NB>
KVAUDIT_SIMD_FN void fma_step(V (&acc)[MR][NB], const V (&wv)[NB], const float* x,
                              std::size_t x_stride) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const V xv = broadcast(x[static_cast<std::size_t>(r) * x_stride]);
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) acc[r][b] = fma(xv, wv[b], acc[r][b]);
  }
}

// Packed: a.pairs holds bf16 pairs (gemm_tiles.h), widened in registers; else a.w holds f32.
template <int MR, int NB, bool kPacked>
KVAUDIT_SIMD_TARGET void tile_fixed(const TileArgs& a) {
  V acc[MR][NB];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) {
      const int n = b == NB - 1 ? a.last_block_outputs : kBlock;
      const float* yr = a.y + static_cast<std::size_t>(r) * a.y_stride + b * kBlock;
      acc[r][b] = a.load_y ? (n == kBlock ? load(yr) : load_first(yr, n)) : zero();
    }
  }
  const float* x = a.x;
  if constexpr (kPacked) {
    // Step 2p: the high halves (w[2p+1]) times x's step 2p; step 2p+1: the low halves (w[2p]).
    // Each half is loaded again rather than kept: AVX2's 16 registers hold 6 × 2 accumulators.
    const std::uint32_t* w = a.pairs;
    for (int s = 0; s < a.steps; s += 2, w += a.step_stride, x += 2) {
      V wv[NB];
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) wv[b] = bf16_high(w + b * a.block_stride);
      fma_step(acc, wv, x, a.x_stride);
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) wv[b] = bf16_low(w + b * a.block_stride);
      fma_step(acc, wv, x + 1, a.x_stride);
    }
  } else {
    const float* w = a.w;
    for (int s = 0; s < a.steps; ++s, w += a.step_stride, ++x) {
      V wv[NB];
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) wv[b] = load(w + b * a.block_stride);
      fma_step(acc, wv, x, a.x_stride);
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + static_cast<std::size_t>(r) * a.y_stride;
    for (int b = 0; b < NB - 1; ++b) store(yr + b * kBlock, acc[r][b]);
    if (a.last_block_outputs == kBlock) {
      store(yr + (NB - 1) * kBlock, acc[r][NB - 1]);
    } else {
      store_first(yr + (NB - 1) * kBlock, acc[r][NB - 1], a.last_block_outputs);
    }
  }
}

template <int MR, bool kPacked>
KVAUDIT_SIMD_TARGET void tile_rows(const TileArgs& a, int blocks) {
  switch (blocks) {
    case 1:
      return tile_fixed<MR, 1, kPacked>(a);
    case 2:
      if constexpr (kMaxBlocks >= 2) return tile_fixed<MR, 2, kPacked>(a);
      break;
    case 3:
      if constexpr (kMaxBlocks >= 3) return tile_fixed<MR, 3, kPacked>(a);
      break;
    case 4:
      if constexpr (kMaxBlocks >= 4) return tile_fixed<MR, 4, kPacked>(a);
      break;
    default:
      break;
  }
  __builtin_trap();  // the driver never asks for more than kMaxBlocks
}

template <bool kPacked>
KVAUDIT_SIMD_TARGET void tile(const TileArgs& a, int rows, int blocks) {
  switch (rows) {
    case 1:
      return tile_rows<1, kPacked>(a, blocks);
    case 2:
      if constexpr (kMaxRows >= 2) return tile_rows<2, kPacked>(a, blocks);
      break;
    case 3:
      if constexpr (kMaxRows >= 3) return tile_rows<3, kPacked>(a, blocks);
      break;
    case 4:
      if constexpr (kMaxRows >= 4) return tile_rows<4, kPacked>(a, blocks);
      break;
    case 5:
      if constexpr (kMaxRows >= 5) return tile_rows<5, kPacked>(a, blocks);
      break;
    case 6:
      if constexpr (kMaxRows >= 6) return tile_rows<6, kPacked>(a, blocks);
      break;
    default:
      break;
  }
  __builtin_trap();
}

KVAUDIT_SIMD_TARGET void f32_tile(const TileArgs& a, int rows, int blocks) {
  tile<false>(a, rows, blocks);
}
KVAUDIT_SIMD_TARGET void bf16_tile(const TileArgs& a, int rows, int blocks) {
  tile<true>(a, rows, blocks);
}

// Pairs [0, count) of `blocks` packed bf16 blocks (block_stride apart) → the fp32 panel of the
// f32 tiles, block by block ([blocks][2 × count][16]): step 2p holds the high halves (w[2p+1]),
// step 2p + 1 the low halves (w[2p]). Bit moves only.
KVAUDIT_SIMD_TARGET void widen_bf16_panel(const std::uint32_t* pairs, std::size_t block_stride,
                                          int blocks, int count, float* panel) {
  for (int b = 0; b < blocks; ++b) {
    const std::uint32_t* lanes = pairs + static_cast<std::size_t>(b) * block_stride;
    float* out = panel + static_cast<std::size_t>(b) * 2 * count * kBlock;
    for (int p = 0; p < count; ++p, lanes += kBlock, out += 2 * kBlock) {
      store(out, bf16_high(lanes));
      store(out + kBlock, bf16_low(lanes));
    }
  }
}
