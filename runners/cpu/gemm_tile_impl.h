// The f32 register tile of gemm_tiles.h, written once over simd16_impl.h's V (no include guard:
// gemm_tiles.cpp includes it once per instruction-set level, inside that level's namespace, after
// simd16_impl.h and with KVAUDIT_SIMD_TARGET, kMaxRows ≤ 6 and kMaxBlocks ≤ 4 defined).

template <int MR, int NB>
KVAUDIT_SIMD_TARGET void f32_tile_fixed(const TileArgs& a) {
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
  const float* w = a.w;
  const float* x = a.x;
  for (int s = 0; s < a.steps; ++s, w += a.step_stride, ++x) {
    V wv[NB];
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) wv[b] = load(w + b * a.block_stride);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const V xv = broadcast(x[static_cast<std::size_t>(r) * a.x_stride]);
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) acc[r][b] = fma(xv, wv[b], acc[r][b]);
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

template <int MR>
KVAUDIT_SIMD_TARGET void f32_tile_rows(const TileArgs& a, int blocks) {
  switch (blocks) {
    case 1:
      return f32_tile_fixed<MR, 1>(a);
    case 2:
      if constexpr (kMaxBlocks >= 2) return f32_tile_fixed<MR, 2>(a);
      break;
    case 3:
      if constexpr (kMaxBlocks >= 3) return f32_tile_fixed<MR, 3>(a);
      break;
    case 4:
      if constexpr (kMaxBlocks >= 4) return f32_tile_fixed<MR, 4>(a);
      break;
    default:
      break;
  }
  __builtin_trap();  // the driver never asks for more than kMaxBlocks
}

KVAUDIT_SIMD_TARGET void f32_tile(const TileArgs& a, int rows, int blocks) {
  switch (rows) {
    case 1:
      return f32_tile_rows<1>(a, blocks);
    case 2:
      if constexpr (kMaxRows >= 2) return f32_tile_rows<2>(a, blocks);
      break;
    case 3:
      if constexpr (kMaxRows >= 3) return f32_tile_rows<3>(a, blocks);
      break;
    case 4:
      if constexpr (kMaxRows >= 4) return f32_tile_rows<4>(a, blocks);
      break;
    case 5:
      if constexpr (kMaxRows >= 5) return f32_tile_rows<5>(a, blocks);
      break;
    case 6:
      if constexpr (kMaxRows >= 6) return f32_tile_rows<6>(a, blocks);
      break;
    default:
      break;
  }
  __builtin_trap();
}
