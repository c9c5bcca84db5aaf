// bf16 conversions and transfers for device_buffer.h.
#include "runners/cuda/device_buffer.h"

#include "runners/model/bf16.h"

namespace kvaudit::cuda {

std::vector<bf16> to_bf16(std::span<const float> values) {
  std::vector<bf16> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    __nv_bfloat16_raw raw;
    raw.x = model::f32_to_bf16_bits(values[i]);
    out[i] = bf16(raw);
  }
  return out;
}

std::vector<float> to_float(std::span<const bf16> values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const __nv_bfloat16_raw raw(values[i]);
    out[i] = model::bf16_bits_to_f32(raw.x);
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
