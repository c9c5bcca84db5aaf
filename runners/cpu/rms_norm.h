// RMSNorm as HF LlamaRMSNorm / Qwen2RMSNorm computes it (docs/design/numerics.md §RMSNorm):
//   var = mean(x²) over hidden (fp32)
//   y   = x · rsqrt(var + eps)        (fp32)        → [bf16]
//   out = weight · y                                  → [bf16]
// The bracketed roundings happen only with Rounding::bf16 (HF: `weight * y.to(input_dtype)`).
#pragma once

#include <span>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// x [rows, hidden], weight [hidden] → out [rows, hidden] (out may alias x).
void rms_norm(std::span<const float> x, std::span<const float> weight, int hidden, float eps,
              Rounding rounding, std::span<float> out);

}  // namespace kvaudit::cpu
