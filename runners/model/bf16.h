// Scalar conversions between f32 and the 16-bit float formats (bf16, IEEE f16). Header-only; used
// by the weight readers (widening) and by the CPU backend (bf16 rounding emulation).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace kvaudit::model {

// bf16 bits → f32 (exact).
inline float bf16_bits_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// f32 → bf16 bits with round-to-nearest-even (PyTorch's `.to(torch.bfloat16)`); NaN stays NaN.
inline std::uint16_t f32_to_bf16_bits(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding_bias) >> 16);
}

// Round an f32 to the nearest bf16 value, kept in f32.
inline float round_to_bf16(float value) { return bf16_bits_to_f32(f32_to_bf16_bits(value)); }

// IEEE binary16 bits → f32 (exact, including subnormals, inf and NaN).
inline float f16_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace kvaudit::model
