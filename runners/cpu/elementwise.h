// Element-wise ops of the decoder block, with HF's bf16 rounding points (docs/design/numerics.md
// §Decoder layer, §MLP, §bf16 rounding points):
//   silu_mul:     out = [silu(gate)] · up → [bf16],  silu(x) = x / (1 + exp(−x)) in fp32 → [bf16]
//   residual_add: residual = residual + delta → [bf16]   (HF keeps the residual stream in bf16)
#pragma once

#include <span>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// gate, up, out: the same size (out may alias gate or up).
void silu_mul(std::span<const float> gate, std::span<const float> up, Rounding rounding,
              std::span<float> out);

// residual += delta, elementwise (same size).
void residual_add(std::span<float> residual, std::span<const float> delta, Rounding rounding);

}  // namespace kvaudit::cpu
