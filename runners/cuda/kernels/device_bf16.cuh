// Device helpers for bf16 values kept in fp32 registers, shared by the kernels of this directory:
// the CPU backend's round_as(Rounding::bf16, x) (round to nearest even, runners/model/bf16.h) and
// the exact widening of bf16 pairs read as 32-bit words (16-byte row loads).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace kvaudit::cuda::device_bf16 {

// x rounded to the nearest bf16 value (ties to even), kept in f32: cpu::round_as(bf16, x).
__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// A 32-bit word holding two bf16 values (little-endian: element 0 in the low half), widened.
__device__ __forceinline__ float low_half(std::uint32_t word) {
  return __uint_as_float(word << 16);
}
__device__ __forceinline__ float high_half(std::uint32_t word) {
  return __uint_as_float(word & 0xffff0000u);
}

// The 8 bf16 values of a 16-byte load, widened to f32 in element order.
__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  out[0] = low_half(raw.x);
  out[1] = high_half(raw.x);
  out[2] = low_half(raw.y);
  out[3] = high_half(raw.y);
  out[4] = low_half(raw.z);
  out[5] = high_half(raw.z);
  out[6] = low_half(raw.w);
  out[7] = high_half(raw.w);
}

}  // namespace kvaudit::cuda::device_bf16
