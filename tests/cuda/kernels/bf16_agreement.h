// Agreement of a CUDA kernel's bf16 output with its CPU twin's (f32 values that are bf16
// representable): the count of differing values, the largest |Δ| and the largest distance in bf16
// ulps (steps between adjacent bf16 values), printed so the GPU log shows the numbers.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace kvaudit::cuda::test {

struct Bf16Agreement {
  std::size_t count = 0;
  std::size_t differing = 0;  // values whose bf16 bits differ
  std::size_t beyond_one_ulp = 0;
  double max_abs_difference = 0.0;
  long max_ulps = 0;  // NaN on one side only counts as a huge distance
};

// Steps between two bf16-representable floats along the bf16 number line (+0 and −0 are equal).
long bf16_ulp_distance(float a, float b);

Bf16Agreement compare_bf16(std::span<const float> expected, std::span<const float> actual);

// One line: "[agreement] what: n=…, differing=…, >1 ulp=…, max|Δ|=…, max ulps=…".
void print_agreement(const std::string& what, const Bf16Agreement& agreement);

}  // namespace kvaudit::cuda::test
