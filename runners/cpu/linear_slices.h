// What linear() and linear_bf16() share around their products (internal to runners/cpu; no
// caller outside linear.cpp and linear_bf16.cpp): how the output features are split over OpenMP
// threads, and the epilogue (bias in fp32, then the rounding) applied to each slice.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// Thread slices are multiples of this many output features: whole panels of the GEMM tiles
// (gemm_driver.h) and of linear_bf16's VDPBF16PS kernel.
inline constexpr int kSliceAlign = 64;

// How linear() and linear_bf16() split the output features over OpenMP threads: `threads`
// contiguous slices of `slice` features (a multiple of kSliceAlign; the last may be
// shorter or empty), one thread inside a parallel region or below 2^18 multiply-adds.
struct OutputSlices {
  int threads;
  int slice;
};
OutputSlices output_slices(int rows, int in_features, int out_features);

// The epilogue of linear() and linear_bf16(): for rows 0..rows-1 of y (row stride `stride`),
// outputs first..first+count-1 get bias[o] added in fp32 (when bias is not empty), then round_all.
void finish_linear_rows(float* y, std::size_t rows, std::size_t stride, std::size_t first,
                        std::size_t count, std::span<const float> bias, Rounding rounding);

// The shared body of linear() and linear_bf16(): over output_slices()' slices (in parallel),
// product(first, count) writes the raw products of outputs first..first+count-1 into every row of
// y [rows, out_features], then finish_linear_rows() adds the bias and rounds them.
template <typename Product>
void for_each_output_slice(float* y, int rows, int in_features, int out_features,
                           std::span<const float> bias, Rounding rounding, Product&& product) {
  // Plain locals, not a structured binding: clang before 16 cannot use one in an OpenMP region.
  const OutputSlices slices = output_slices(rows, in_features, out_features);
  const int threads = slices.threads;
  const int slice = slices.slice;
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int first = t * slice;
    const int count = std::min(slice, out_features - first);
    if (count <= 0) continue;
    product(first, count);
    finish_linear_rows(y, static_cast<std::size_t>(rows), static_cast<std::size_t>(out_features),
                       static_cast<std::size_t>(first), static_cast<std::size_t>(count), bias,
                       rounding);
  }
}

}  // namespace kvaudit::cpu
