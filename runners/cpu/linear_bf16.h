// Linear layers of bf16 models on AVX512-BF16 (docs/design/numerics.md §Linear layers):
//   y [rows, out] = x [rows, in] · Wᵀ (+ bias),  W row-major [out, in] (HF layout)
// with bf16 x and W and fp32 accumulation, the bias added in fp32 afterwards, then round_all
// (Rounding::bf16 rounds every output to bf16) — the contract of linear() (linear.h), which stays
// the CPU twin and the fallback.
//
// VDPBF16PS (_mm512_dpbf16_ps) per fp32 lane j: acc += a[2j+1]·b[2j+1], then acc += a[2j]·b[2j],
// each step an fp32 fused multiply-add with round-to-nearest-even (MXCSR neither read nor
// written), as the SDM's pseudocode has it. A product of two bf16 values (8-bit significands) is
// exact in fp32, so each step rounds only the sum; denormal inputs are read as zero and denormal
// results flushed to zero. One output is therefore the fp32 sum
//   y[r][o] = (((0 + x₁w₁) + x₀w₀) + x₃w₃) + x₂w₂ + …   over the input pairs in order,
// each partial sum rounded to fp32: the order is fixed per output and does not depend on how many
// rows or which threads compute it (results are row- and thread-invariant, bit for bit), and the
// error against the exact dot product is at most γ_K·Σ|xᵢwᵢ| (γ_K = K·u/(1 − K·u), u = 2⁻²⁴).
// From a dozen rows on, the same sums run as fp32 FMAs in that order under DAZ/FTZ (same bits;
// faster where VDPBF16PS issues at half the FMA rate, as on Sapphire Rapids: linear_bf16.cpp).
//
// Why linear() is the CPU twin: its cblas_sgemm on the same bf16-valued f32 numbers computes the
// same exact products and differs only in the order of its fp32 sums (its blocked kernel's) and in
// keeping denormals, so the two agree to fp32 rounding before the bf16 rounding, and after it to
// 1 bf16 ulp except where the dot product nearly cancels (tests/cpu_runtime/linear_bf16_test.cpp
// measures this). It runs everywhere (no AVX512-BF16 needed) and is what f32 models use. HF's bf16
// GEMM (oneDNN on CPU, cuBLAS on GPU) has yet another order; neither path reproduces it bit for
// bit.
//
// Availability: cpu_supports_bf16_kernel() checks the CPU at run time (the kernels are compiled
// with function-level target attributes; no global -m flags). AMX is never used (its tile state is
// not enabled on every machine that lists it). bf16_kernel_enabled() also honours the environment
// variable KVAUDIT_CPU_BF16_KERNEL: "0" forces linear()'s sgemm path (A/B checks); CpuModel reads
// it once, at construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>
#include <vector>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// Whether this CPU executes AVX512-BF16 (with AVX512F/BW/VL).
bool cpu_supports_bf16_kernel();
// cpu_supports_bf16_kernel() and KVAUDIT_CPU_BF16_KERNEL is not "0" (read at every call).
bool bf16_kernel_enabled();

namespace detail {
// std::allocator with 64-byte (cache line, zmm) alignment.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
}  // namespace detail

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

// Which micro-kernel linear_bf16 runs for `rows` rows (linear_bf16.cpp; both give the same bits):
// false for VDPBF16PS on the packed weights, true for its fp32-FMA twin on widened copies.
bool linear_bf16_runs_fma(int rows);

// linear() through the AVX512-BF16 kernel: x [rows, in_features] (bf16-representable in bf16 mode;
// other values are rounded to the nearest bf16, round-to-nearest-even), bias [out] or empty, y
// [rows, out]. Splits the output features over the OpenMP threads as linear() does (one thread
// inside a parallel region or for small products). Throws std::logic_error where
// cpu_supports_bf16_kernel() is false.
void linear_bf16(std::span<const float> x, int rows, int in_features,
                 const PackedBf16Weight& weight, std::span<const float> bias, Rounding rounding,
                 std::span<float> y);

}  // namespace kvaudit::cpu
