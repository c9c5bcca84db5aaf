// bf16 conversions and transfers for device_buffer.h.
#include "runners/cuda/device_buffer.h"

#include <cstring>

#include "runners/model/bf16.h"

namespace kvaudit::cuda {

std::uint16_t bf16_bits(float value) {
  const float rounded = model::round_to_bf16(value);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &rounded, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

float float_from_bf16_bits(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

std::vector<bf16> to_bf16(std::span<const float> values) {
  std::vector<bf16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    __nv_bfloat16_raw raw;
    raw.x = bf16_bits(values[i]);
    out[i] = bf16(raw);
  }
  return out;
}

std::vector<float> to_float(std::span<const bf16> values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const __nv_bfloat16_raw raw(values[i]);
    out[i] = float_from_bf16_bits(raw.x);
  }
  return out;
}

DeviceBuffer<bf16> to_device_bf16(std::span<const float> values) {
  DeviceBuffer<bf16> buffer(values.size());
  const std::vector<bf16> host = to_bf16(values);
  buffer.upload(host);
  return buffer;
}

std::vector<float> download_as_float(const bf16* device, std::size_t count) {
  std::vector<bf16> host(count);
  if (count > 0) {
    KVAUDIT_CUDA_CHECK(
        cudaMemcpy(host.data(), device, count * sizeof(bf16), cudaMemcpyDeviceToHost));
  }
  return to_float(host);
}

std::vector<float> download_as_float(const DeviceBuffer<bf16>& buffer) {
  return download_as_float(buffer.data(), buffer.size());
}

}  // namespace kvaudit::cuda
