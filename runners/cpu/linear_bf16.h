// Linear layers of bf16 models (docs/design/numerics.md §Linear layers, §Canonical evaluation
// order):
//   y [rows, out] = x [rows, in] · Wᵀ (+ bias),  W row-major [out, in] (HF layout)
// with bf16 x and W and fp32 accumulation, the bias added in fp32 afterwards, then round_all
// (Rounding::bf16 rounds every output to bf16) — the contract of linear() (linear.h).
//
// The sums are those of VDPBF16PS (_mm512_dpbf16_ps) per fp32 lane j: acc += a[2j+1]·b[2j+1], then
// acc += a[2j]·b[2j], each step an fp32 fused multiply-add with round-to-nearest-even, as the SDM's
// pseudocode has it. A product of two bf16 values (8-bit significands) is exact in fp32, so each
// step rounds only the sum; denormal inputs are read as zero and denormal results flushed to zero.
// One output is therefore the fp32 sum
//   y[r][o] = (((0 + x₁w₁) + x₀w₀) + x₃w₃) + x₂w₂ + …   over the input pairs in order,
// each partial sum rounded to fp32: the order is fixed per output and depends neither on how many
// rows or which threads compute it nor on the instruction-set level (cpu_isa.h): every level runs
// this chain as fp32 FMAs under DAZ/FTZ, and avx512bf16 also as VDPBF16PS where that gives the same
// bits (linear_bf16.cpp). The error against the exact dot product is at most γ_K·Σ|xᵢwᵢ|
// (γ_K = K·u/(1 − K·u), u = 2⁻²⁴).
//
// linear() on the same bf16-valued f32 numbers computes the same exact products and differs only in
// the order of its fp32 sums (plain k order) and in keeping denormals, so the two agree to fp32
// rounding before the bf16 rounding, and after it to 1 bf16 ulp except where the dot product nearly
// cancels (tests/cpu_runtime/linear_bf16_test.cpp measures this). HF's bf16 GEMM (oneDNN on CPU,
// cuBLAS on GPU) has yet another order; neither path reproduces it bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runners/cpu/cache_line_allocator.h"
#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// Whether VDPBF16PS on this CPU sums as the SDM says (a start-up probe), so that the avx512bf16
// level may use it; false on CPUs without AVX512-BF16.
bool dpbf16_gives_the_canonical_bits();

// A weight [out, in] in VDPBF16PS layout: blocks of 16 output features; within a block, input pair
// p of output o is one 32-bit lane (w[o][2p] in the low half, w[o][2p+1] in the high half), the 16
// lanes of pair p contiguous. An odd in_features is padded with a zero input; the last block's
// missing outputs are zero rows. Storage is 64-byte aligned (one cache line per pair of a block).
class PackedBf16Weight {
 public:
  PackedBf16Weight() = default;
  // `weight` is row-major [out_features, in_features] f32 whose values are all exactly
  // representable in bf16 (a bf16 model's weights). Throws std::invalid_argument naming `name` if
  // the size is wrong or a value is not bf16-representable (no silent rounding of weights).
  PackedBf16Weight(std::span<const float> weight, int out_features, int in_features,
                   std::string_view name);

  int out_features() const { return out_features_; }
  int in_features() const { return in_features_; }
  int pairs() const { return (in_features_ + 1) / 2; }
  int blocks() const { return (out_features_ + 15) / 16; }
  // [blocks][pairs][16] lanes.
  const std::uint32_t* data() const { return storage_.data(); }

 private:
  int out_features_ = 0;
  int in_features_ = 0;
  std::vector<std::uint32_t, detail::CacheLineAllocator<std::uint32_t>> storage_;
};

// Which micro-kernel linear_bf16 runs for `rows` rows at the active level (both give the same
// bits): true for VDPBF16PS on the packed weights, false for the fp32-FMA tiles on widened copies.
bool linear_bf16_runs_dpbf16(int rows);

// x [rows, in_features] (bf16-representable in bf16 mode; other values are rounded to the nearest
// bf16, round-to-nearest-even), bias [out] or empty, y [rows, out]. Splits the output features over
// the OpenMP threads as linear() does (one thread inside a parallel region or for small products).
// Runs on every x86-64 CPU.
void linear_bf16(std::span<const float> x, int rows, int in_features,
                 const PackedBf16Weight& weight, std::span<const float> bias, Rounding rounding,
                 std::span<float> y);

}  // namespace kvaudit::cpu
