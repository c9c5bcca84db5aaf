// Test helper: agreement between a CPU reference output and a GPU output of attention, both
// [rows, heads, head_dim] as f32 (bf16 values). An element's error is counted in bf16 ulps at the
// magnitude max(|reference element|, RMS of its (row, head) reference vector): the deviations the
// backends may show (fp32 summation order, a [p] or [s] rounding that lands on the other side of
// a tie) scale with the output vector as a whole, not with one element that happens to cancel to
// near zero, so an element-only ulp would flag harmless differences in near-zero outputs.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace kvaudit::cuda::test {

struct Agreement {
  std::size_t count = 0;      // elements compared
  std::size_t differing = 0;  // elements whose bf16 values differ
  std::size_t nonfinite = 0;  // GPU elements that are NaN or infinite
  double max_abs = 0.0;       // max |Δ|
  double max_ulps = 0.0;      // max |Δ| / ulp_bf16(max(|ref|, vector RMS))

  double identical_fraction() const {
    return count == 0 ? 0.0 : 1.0 - static_cast<double>(differing) / static_cast<double>(count);
  }
  void merge(const Agreement& other);
};

// vector_length = head_dim. Sizes must match (throws std::invalid_argument otherwise).
Agreement compare_attention(std::span<const float> reference, std::span<const float> gpu,
                            std::size_t vector_length);

// Prints one line: label, n, max |Δ|, max ulps, differing count and fraction, non-finite count.
void print_agreement(const std::string& label, const Agreement& agreement);

}  // namespace kvaudit::cuda::test
