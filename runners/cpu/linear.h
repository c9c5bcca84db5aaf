// Linear layers (HF nn.Linear, docs/design/numerics.md §Linear layers and §Canonical evaluation
// order):
//   y [rows, out] = x [rows, in] · Wᵀ (+ bias),  W row-major [out, in] (HF layout)
// Each output is one fp32 fused multiply-add chain over the inputs in order,
//   acc = 0; for k = 0 … in−1: acc = fma(x[r][k], W[o][k], acc)
// then the bias is added in fp32 and, with Rounding::bf16, the result rounded to bf16 (HF: bf16
// GEMM output, bias in the epilogue). Threads, vector width (KVAUDIT_CPU_ISA, cpu_isa.h), cache
// blocking and the number of rows computed together split the outputs, never the chain, so every
// output has the same bits on every x86-64 machine and in every batch. lm_head is the same product
// without bias: logits [rows, vocab], bf16-rounded in bf16 mode.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "runners/cpu/cache_line_allocator.h"
#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// A weight [out, in] laid out for the GEMM tiles: blocks of 16 output features, within a block
// input k of output o at [k][o mod 16] (16 floats a step), the last block's missing outputs zero.
// Same bits as linear() on the unpacked weight; saves packing a panel on every call (decoding).
class PackedF32Weight {
 public:
  PackedF32Weight() = default;
  // Throws std::invalid_argument naming `name` if the shape is negative or the size wrong.
  PackedF32Weight(std::span<const float> weight, int out_features, int in_features,
                  std::string_view name);

  int out_features() const { return out_features_; }
  int in_features() const { return in_features_; }
  bool empty() const { return storage_.empty(); }
  // [blocks][in_features][16]
  const float* data() const { return storage_.data(); }

 private:
  int out_features_ = 0;
  int in_features_ = 0;
  std::vector<float, detail::CacheLineAllocator<float>> storage_;
};

// bias is [out] or empty. Splits the output features over the OpenMP threads (one thread when
// called inside a parallel region or for small products).
void linear(std::span<const float> x, int rows, int in_features, std::span<const float> weight,
            int out_features, std::span<const float> bias, Rounding rounding, std::span<float> y);

// The same product on a packed weight (same bits).
void linear(std::span<const float> x, int rows, int in_features, const PackedF32Weight& weight,
            std::span<const float> bias, Rounding rounding, std::span<float> y);

// logits [rows, vocab] = hidden [rows, hidden] · lm_headᵀ.
void lm_head(std::span<const float> hidden, int rows, int hidden_size,
             std::span<const float> output_projection, int vocab, Rounding rounding,
             std::span<float> logits);

// The general product in the same order (KVgrad's backward; a BLAS sgemm's arguments, row-major):
//   C[i][j] = alpha · acc[i][j] (+ C[i][j] when accumulate),
//   acc[i][j] = fma chain over l = 0 … k−1 of op(A)[i][l] · op(B)[l][j]
// op(A) is A [m, k] (lda ≥ k), or Aᵀ with A stored [k, m] (lda ≥ m) when trans_a; op(B) is
// B [k, n] (ldb ≥ n), or Bᵀ with B stored [n, k] (ldb ≥ k) when trans_b. alpha == 1 multiplies
// nothing. Single-threaded when called inside a parallel region.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, bool accumulate, float* c, int ldc);

}  // namespace kvaudit::cpu
