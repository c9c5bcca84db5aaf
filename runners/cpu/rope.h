// Rotary position embedding on the CPU backend, rotate-half (NeoX) layout, exactly as HF applies
// it (docs/design/numerics.md §RoPE; transformers models/llama/modeling_llama.py): with cos/sin
// from model::rope_cos_sin (runners/model/rope_tables.h),
//   out = x·cos + rotate_half(x)·sin, rotate_half(x) = [−x[d/2:], x[:d/2]];
//   each product → [bf16], the sum → [bf16] (brackets: bf16 rounding when the model is bf16).
#pragma once

#include <span>

#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// x [T, num_heads, head_dim] rotated in place with cos/sin [T, head_dim] of the same T rows.
void apply_rope(std::span<float> x, int num_heads, int head_dim, std::span<const float> cos,
                std::span<const float> sin, Rounding rounding);

}  // namespace kvaudit::cpu
