// Linear layers through OpenBLAS (HF nn.Linear, docs/design/numerics.md §Linear layers):
//   y [rows, out] = x [rows, in] · Wᵀ (+ bias),  W row-major [out, in] (HF layout)
// The product is cblas_sgemm (fp32 accumulation); the bias is added in fp32 afterwards; with
// Rounding::bf16 each output is then rounded to bf16 (HF: bf16 GEMM output, bias in the epilogue).
// lm_head is the same GEMM without bias: logits [rows, vocab], bf16-rounded in bf16 mode.
#pragma once

#include <cstddef>
#include <span>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// Makes OpenBLAS run single-threaded (openblas_set_num_threads(1), a process-wide setting):
// linear() parallelizes with OpenMP itself. CpuModel's constructor calls it.
void use_single_threaded_openblas();

// bias is [out] or empty. Splits the output features over the OpenMP threads (one thread when
// called inside a parallel region); results do not depend on the thread count, nor a row's on how
// many rows are computed with it (small products are padded: linear.cpp §Row invariance).
void linear(std::span<const float> x, int rows, int in_features, std::span<const float> weight,
            int out_features, std::span<const float> bias, Rounding rounding, std::span<float> y);

// logits [rows, vocab] = hidden [rows, hidden] · lm_headᵀ.
void lm_head(std::span<const float> hidden, int rows, int hidden_size,
             std::span<const float> output_projection, int vocab, Rounding rounding,
             std::span<float> logits);

}  // namespace kvaudit::cpu
