// The bf16 GEMM of bf16 linear layers; see linear_bf16.h for the formula and numerics.
//
// Every level computes one chain per output: for each input pair p in order, acc = fma(x[2p+1],
// w[2p+1], acc), then acc = fma(x[2p], w[2p], acc), in fp32 with round-to-nearest-even, denormals
// read as zero and flushed (MXCSR DAZ/FTZ) — what VDPBF16PS does. Two ways to get those bits:
//  * canonical (every level): x widened to fp32 in that order once per call, the packed weights
//    widened in registers by gemm_tiles.h's bf16 tiles (few rows) or into an f32 panel shared by
//    all rows (many rows), then fp32 FMAs under DAZ/FTZ. A bf16 product is exact in fp32, so each
//    FMA rounds exactly the sum VDPBF16PS rounds.
//  * dpbf16 (avx512bf16 only, fewer than kFmaMinRows rows): a register tile of up to 6 rows × 4
//    blocks of 16 outputs, one VDPBF16PS per pair on the packed weights as they are (half the
//    bytes of f32, what decoding is bound by). Used only where a start-up probe finds this CPU's
//    VDPBF16PS summing in the SDM's order, i.e. giving the canonical bits; from kFmaMinRows rows
//    on the canonical path is faster (VDPBF16PS issues at half the multiply-add rate of
//    VFMADD231PS on Sapphire Rapids).
// Nothing about a tile or a level changes the operations one output sees, hence row, thread and
// machine invariance. Threads: the slices of linear() (multiples of 64 outputs).
#include "runners/cpu/linear_bf16.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/cache_line_allocator.h"
#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/gemm_driver.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/linear_slices.h"
#include "runners/cpu/shape_check.h"
#include "runners/model/bf16.h"

#define KVAUDIT_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace kvaudit::cpu {
namespace {

constexpr int kBlock = 16;      // outputs per zmm register
constexpr int kTileRows = 6;    // rows per register tile
constexpr int kTileBlocks = 4;  // blocks of 16 outputs per register tile
static_assert(kSliceAlign == kTileBlocks * kBlock);
// dpbf16: packed weight bytes per cache panel (L2 is 1-2 MiB per core on AVX512-BF16 CPUs).
constexpr std::size_t kPanelBytes = 512 * 1024;
// From this many rows on, the canonical path runs even where dpbf16 could.
constexpr int kFmaMinRows = 12;
// From this many rows on, the canonical path widens weight panels once for all rows rather than in
// every tile's registers.
constexpr int kWidenedPanelMinRows = 12;
// MXCSR: round-to-nearest-even (bits 13-14 clear), flush-to-zero (bit 15), denormals-are-zero
// (bit 6).
constexpr unsigned kMxcsrRounding = 0x6000u;
constexpr unsigned kMxcsrFtzDaz = 0x8040u;
// The maskz_ forms of shifts and permutes with every lane selected: GCC 12's plain forms trip
// -Wmaybe-uninitialized on their undefined pass-through operand.
constexpr __mmask16 kAllLanes = 0xffff;

struct TileArgs {
  const void* x;             // the tile's first row: x pairs (dpbf16) or x floats (fma)
  std::size_t x_stride;      // elements from one row of x to the next
  const void* w;             // the tile's first block
  std::size_t block_stride;  // elements from one block of 16 outputs to the next
  std::size_t step_stride;   // elements from one step (pair or element) to the next
  int steps;                 // pairs (dpbf16) or 2 × pairs (fma)
  float* y;                  // the tile's first row and output
  std::size_t y_stride;
  unsigned last_mask;  // valid outputs of the tile's last block (bit i: output i)
  bool load_y;         // fma: continue the sums held in y (a later K block) instead of from 0
};

template <int MR, int NB>
KVAUDIT_BF16_TARGET inline void store_tile(const TileArgs& a, const __m512 (&acc)[MR][NB]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* yr = a.y + r * a.y_stride;
#pragma GCC unroll 8
    for (int b = 0; b < NB - 1; ++b) _mm512_storeu_ps(yr + b * kBlock, acc[r][b]);
    _mm512_mask_storeu_ps(yr + (NB - 1) * kBlock, static_cast<__mmask16>(a.last_mask),
                          acc[r][NB - 1]);
  }
}

// y[MR rows][NB × 16 outputs] = x · Wᵀ, VDPBF16PS per pair in order. w: [block][pair][16] lanes.
template <int MR, int NB>
KVAUDIT_BF16_TARGET void dpbf16_tile(const TileArgs& a) {
  __m512 acc[MR][NB];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  }
  const std::uint32_t* w = static_cast<const std::uint32_t*>(a.w);
  const std::uint32_t* x = static_cast<const std::uint32_t*>(a.x);
  for (int p = 0; p < a.steps; ++p, w += a.step_stride, ++x) {
    __m512bh wv[NB];
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) wv[b] = (__m512bh)_mm512_load_si512(w + b * a.block_stride);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[r * a.x_stride]));
#pragma GCC unroll 8
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_dpbf16_ps(acc[r][b], wv[b], xv);
    }
  }
  store_tile<MR, NB>(a, acc);
}

using TileFn = void (*)(const TileArgs&);

template <int MR>
struct TileRow {
  static constexpr TileFn dpbf16[kTileBlocks] = {&dpbf16_tile<MR, 1>, &dpbf16_tile<MR, 2>,
                                                 &dpbf16_tile<MR, 3>, &dpbf16_tile<MR, 4>};
};

constexpr const TileFn* kDpbf16Tiles[kTileRows] = {TileRow<1>::dpbf16, TileRow<2>::dpbf16,
                                                   TileRow<3>::dpbf16, TileRow<4>::dpbf16,
                                                   TileRow<5>::dpbf16, TileRow<6>::dpbf16};

// x [rows, in] rounded to bf16 (model::f32_to_bf16_bits) and widened in VDPBF16PS's order: row r
// of `widened` [rows][2 × pairs] holds x[1], x[0], x[3], x[2], … (an odd `in` padded by a zero).
void widen_rows_to_bf16(const float* x, std::size_t rows, std::size_t in, float* widened) {
  const std::size_t padded = in + in % 2;
  for (std::size_t row = 0; row < rows; ++row) {
    const float* xr = x + row * in;
    float* out = widened + row * padded;
    for (std::size_t i = 0; i < padded; i += 2) {
      const float even = model::round_to_bf16(xr[i]);
      const float odd = i + 1 < in ? model::round_to_bf16(xr[i + 1]) : 0.0f;
      out[i] = odd;
      out[i + 1] = even;
    }
  }
}

// x [rows, in] rounded to bf16 (round-to-nearest-even, NaN kept quiet, as model::f32_to_bf16_bits)
// with an odd `in` padded by a zero, into `pairs` ([rows][pairs] lanes: x[2p] low, x[2p+1] high),
// for the dpbf16 kernel.
KVAUDIT_BF16_TARGET void round_rows_to_bf16(const float* x, std::size_t rows, std::size_t in,
                                            std::uint32_t* pairs) {
  const std::size_t padded = in + in % 2;
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i infinity = _mm512_set1_epi32(0x7f800000);
  for (std::size_t row = 0; row < rows; ++row) {
    const float* xr = x + row * in;
    for (std::size_t i = 0; i < padded; i += kBlock) {
      const std::size_t n = std::min<std::size_t>(kBlock, in - std::min(in, i));
      const std::size_t m = std::min<std::size_t>(kBlock, padded - i);
      const __mmask16 load = static_cast<__mmask16>((1u << n) - 1u);
      const __mmask16 store = static_cast<__mmask16>((1u << m) - 1u);
      const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(load, xr + i));
      // u + 0x7fff + ((u >> 16) & 1), high half kept; NaN: quieted, high half kept.
      const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAllLanes, u, 16), one);
      __m512i rounded = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(half, lsb)), high);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, magnitude), infinity);
      rounded =
          _mm512_mask_mov_epi32(rounded, nan, _mm512_and_si512(_mm512_or_si512(u, quiet), high));
      _mm512_mask_cvtepi32_storeu_epi16(
          reinterpret_cast<std::uint16_t*>(pairs + row * (padded / 2)) + i, store,
          _mm512_maskz_srli_epi32(kAllLanes, rounded, 16));
    }
  }
}

// Whether VDPBF16PS sums a lane as the SDM's pseudocode says (pair p: x[2p+1]·w[2p+1] first, then
// x[2p]·w[2p], each an fp32 FMA): with pairs (0·0, 1·1) and (1·3u/4, 1·u/2), u = 2⁻²³, that order
// gives 1 + u and the other 1 + 2u.
KVAUDIT_BF16_TARGET bool dpbf16_follows_the_sdm_order() {
  const auto pair = [](float low, float high) {
    return static_cast<int>(static_cast<std::uint32_t>(model::f32_to_bf16_bits(low)) |
                            static_cast<std::uint32_t>(model::f32_to_bf16_bits(high)) << 16);
  };
  __m512 acc = _mm512_setzero_ps();
  acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(pair(0.0f, 1.0f)),
                         (__m512bh)_mm512_set1_epi32(pair(0.0f, 1.0f)));
  acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(pair(1.0f, 1.0f)),
                         (__m512bh)_mm512_set1_epi32(pair(std::ldexp(3.0f, -25), 0x1p-24f)));
  return _mm512_cvtss_f32(acc) == 1.0f + 0x1p-23f;
}

// Outputs [first, first + count) of every row (first a multiple of 64), before bias and rounding,
// with the dpbf16 kernel: panels of weights in L2, row tiles streaming past them.
void dpbf16_slice(const std::uint32_t* x_pairs, int rows, const PackedBf16Weight& weight, int first,
                  int count, float* y) {
  const std::size_t pairs = static_cast<std::size_t>(weight.pairs());
  const std::size_t out = static_cast<std::size_t>(weight.out_features());
  const std::size_t packed_block = pairs * kBlock;  // lanes per packed block
  const int panel =
      std::max(kSliceAlign, static_cast<int>(kPanelBytes / std::max<std::size_t>(1, 4 * pairs)) /
                                kSliceAlign * kSliceAlign);
  const int end = first + count;
  for (int panel_first = first; panel_first < end; panel_first += panel) {
    const int panel_end = std::min(end, panel_first + panel);
    for (int row = 0; row < rows; row += kTileRows) {
      const int tile_rows = std::min(kTileRows, rows - row);
      for (int o = panel_first; o < panel_end; o += kSliceAlign) {
        const int outputs = std::min(kSliceAlign, panel_end - o);
        const int blocks = (outputs + kBlock - 1) / kBlock;
        TileArgs a;
        a.x = x_pairs + static_cast<std::size_t>(row) * pairs;
        a.x_stride = pairs;
        a.w = weight.data() + static_cast<std::size_t>(o / kBlock) * packed_block;
        a.block_stride = packed_block;
        a.step_stride = kBlock;
        a.steps = static_cast<int>(pairs);
        a.y = y + static_cast<std::size_t>(row) * out + static_cast<std::size_t>(o);
        a.y_stride = out;
        a.last_mask = (1u << (outputs - (blocks - 1) * kBlock)) - 1u;
        a.load_y = false;
        kDpbf16Tiles[tile_rows - 1][blocks - 1](a);
      }
    }
  }
}

// The same on the canonical path (x_widened: widen_rows_to_bf16's [rows][2 × pairs]) with the
// active level's tiles under DAZ/FTZ. Fewer than kWidenedPanelMinRows rows: the bf16 tiles, which
// widen the packed pairs in registers (decoding reads half the bytes of f32). From that many rows
// on: per 64-output panel and block of tiles::kStepBlock steps, the weights widened once into a
// thread-local f32 panel that every row tile reads with the f32 tiles (faster once the widening is
// shared by enough rows). Both give the same bits.
void canonical_slice(const tiles::TileKernel& kernel, const float* x_widened, int rows,
                     const PackedBf16Weight& weight, int first, int count, float* y) {
  const std::size_t pairs = static_cast<std::size_t>(weight.pairs());
  const std::size_t packed_block = pairs * kBlock;
  const int out = weight.out_features();
  const auto packed_at = [&](int o, int s0) {
    return weight.data() + static_cast<std::size_t>(o / kBlock) * packed_block +
           static_cast<std::size_t>(s0 / 2) * kBlock;
  };
  const unsigned saved_mxcsr = _mm_getcsr();
  _mm_setcsr((saved_mxcsr & ~kMxcsrRounding) | kMxcsrFtzDaz);
  static_assert(tiles::kStepBlock % 2 == 0 && tiles::kBlock == kBlock &&
                tiles::kPanelOutputs == kSliceAlign);
  if (rows < kWidenedPanelMinRows) {
    tiles::run_tiles(kernel, x_widened, 2 * pairs, rows, static_cast<int>(2 * pairs), first, count,
                     y, static_cast<std::size_t>(out), [&](int o, int s0, int) {
                       return tiles::PanelView{nullptr, packed_block, kBlock, packed_at(o, s0)};
                     });
  } else {
    thread_local std::vector<float, detail::CacheLineAllocator<float>> panel;
    panel.resize(static_cast<std::size_t>(tiles::kStepBlock) * kSliceAlign);
    tiles::run_tiles(kernel, x_widened, 2 * pairs, rows, static_cast<int>(2 * pairs), first, count,
                     y, static_cast<std::size_t>(out), [&](int o, int s0, int sc) {
                       const int outputs = std::min(kSliceAlign, out - o);
                       kernel.widen_bf16_panel(packed_at(o, s0), packed_block,
                                               (outputs + kBlock - 1) / kBlock, sc / 2,
                                               panel.data());
                       return tiles::PanelView{panel.data(), static_cast<std::size_t>(sc) * kBlock,
                                               kBlock, nullptr};
                     });
  }
  _mm_setcsr(saved_mxcsr);
}

}  // namespace

bool dpbf16_gives_the_canonical_bits() {
  static const bool available =
      detected_cpu_isa() == CpuIsa::avx512bf16 && dpbf16_follows_the_sdm_order();
  return available;
}

PackedBf16Weight::PackedBf16Weight(std::span<const float> weight, int out_features, int in_features,
                                   std::string_view name)
    : out_features_(out_features), in_features_(in_features) {
  const std::string what(name);
  require_weight_shape(weight, out_features, in_features, what);
  const std::size_t out = static_cast<std::size_t>(out_features);
  const std::size_t in = static_cast<std::size_t>(in_features);
  // A bf16 value is an f32 whose low 16 bits are zero. Checked first (no exception may leave an
  // OpenMP region), then packed block by block (16 rows read in order, one block written).
  const auto bits_of = [&](std::size_t index) {
    return std::bit_cast<std::uint32_t>(weight[index]);
  };
  const std::size_t n = out * in;
  const bool parallel = n > (std::size_t{1} << 20);
  std::size_t first_bad = n;
#pragma omp parallel for schedule(static) reduction(min : first_bad) if (parallel)
  for (std::size_t index = 0; index < n; ++index) {
    if ((bits_of(index) & 0xffffu) != 0) first_bad = std::min(first_bad, index);
  }
  if (first_bad < n) {
    std::ostringstream message;
    message << what << ": element [" << first_bad / in << "][" << first_bad % in
            << "] = " << std::setprecision(9) << weight[first_bad]
            << " is not representable in bf16 (the bf16 kernel takes a bf16 model's weights as "
               "they are, it does not round them)";
    throw std::invalid_argument(message.str());
  }
  const std::size_t block_stride = static_cast<std::size_t>(pairs()) * kBlock;
  const std::size_t block_count = static_cast<std::size_t>(blocks());
  storage_.assign(block_count * block_stride, 0u);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::size_t block = 0; block < block_count; ++block) {
    for (std::size_t lane = 0; lane < kBlock && block * kBlock + lane < out; ++lane) {
      const std::size_t row = (block * kBlock + lane) * in;
      std::uint32_t* lanes = storage_.data() + block * block_stride + lane;
      for (std::size_t p = 0; p < in / 2; ++p) {
        lanes[p * kBlock] = bits_of(row + 2 * p) >> 16 | (bits_of(row + 2 * p + 1) & 0xffff0000u);
      }
      if (in % 2 != 0) lanes[(in / 2) * kBlock] = bits_of(row + in - 1) >> 16;
    }
  }
}

bool linear_bf16_runs_dpbf16(int rows) {
  return rows < kFmaMinRows && active_cpu_isa() == CpuIsa::avx512bf16 &&
         dpbf16_gives_the_canonical_bits();
}

void linear_bf16(std::span<const float> x, int rows, int in_features,
                 const PackedBf16Weight& weight, std::span<const float> bias, Rounding rounding,
                 std::span<float> y) {
  if (in_features != weight.in_features()) {
    throw std::invalid_argument("linear_bf16: x has " + std::to_string(in_features) +
                                " features, the weight takes " +
                                std::to_string(weight.in_features()));
  }
  const int out_features = weight.out_features();
  const std::size_t r = static_cast<std::size_t>(rows);
  const std::size_t in = static_cast<std::size_t>(in_features);
  const std::size_t out = static_cast<std::size_t>(out_features);
  require_size(x, r * in, "linear_bf16: x");
  require_size(y, r * out, "linear_bf16: y");
  if (!bias.empty()) require_size(bias, out, "linear_bf16: bias");
  if (rows == 0 || out_features == 0) return;

  // x rounded to bf16 once per call, made by the calling thread and read by all threads: as pairs
  // (dpbf16) or widened in VDPBF16PS's order (canonical).
  const std::size_t pairs = static_cast<std::size_t>(weight.pairs());
  const bool dpbf16 = linear_bf16_runs_dpbf16(rows);
  thread_local std::vector<std::uint32_t> x_pairs;
  thread_local std::vector<float> x_widened;
  if (dpbf16) {
    x_pairs.resize(r * pairs);
    round_rows_to_bf16(x.data(), r, in, x_pairs.data());
  } else {
    x_widened.resize(r * 2 * pairs);
    widen_rows_to_bf16(x.data(), r, in, x_widened.data());
  }
  // (pointers: inside the parallel region below the names would be each thread's own buffers)
  const std::uint32_t* const xp = x_pairs.data();
  const float* const xw = x_widened.data();
  const tiles::TileKernel& kernel = tiles::tile_kernel(active_cpu_isa());
  const auto product = [&](int first, int count) {
    if (dpbf16) {
      dpbf16_slice(xp, rows, weight, first, count, y.data());
    } else {
      canonical_slice(kernel, xw, rows, weight, first, count, y.data());
    }
  };
  for_each_output_slice(y.data(), rows, in_features, out_features, bias, rounding, product);
}

}  // namespace kvaudit::cpu
