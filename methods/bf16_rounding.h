// bf16 rounding for scorers that emulate kvpress's bf16 intermediate results (model_is_bf16):
// round-to-nearest-even of an f32 to the nearest bf16 value, returned widened to f32 (what
// `tensor.to(torch.bfloat16)` does). NaN stays NaN. Methods do not include the backends' numerics.
#pragma once

#include <bit>
#include <cstdint>

namespace kvaudit::methods {

inline float round_to_bf16(float x) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return std::bit_cast<float>(bits | 0x00400000u);  // quiet NaN
  const std::uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return std::bit_cast<float>(bits & 0xffff0000u);
}

// Rounds when `enabled` (the model computes in bf16), else returns x unchanged.
inline float maybe_bf16(float x, bool enabled) { return enabled ? round_to_bf16(x) : x; }

}  // namespace kvaudit::methods
