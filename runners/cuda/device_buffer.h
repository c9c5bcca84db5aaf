// DeviceBuffer<T>: an owning, move-only array in GPU memory (plain cudaMalloc; never managed
// memory), with whole-buffer and ranged copies to and from host spans. Sizes are in elements.
// bf16 helpers: bf16 values travel as __nv_bfloat16; to_device_bf16 converts f32 values that are
// already bf16-representable (the CPU backend's bf16 mode) exactly, and rounds others to nearest
// even, as HF's .to(torch.bfloat16) does.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {

using bf16 = __nv_bfloat16;

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    if (count_ > 0) KVAUDIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }

  // Host → device into elements [offset, offset + host.size()).
  void upload(std::span<const T> host, std::size_t offset = 0) {
    check_range(offset, host.size(), "upload");
    if (!host.empty()) {
      KVAUDIT_CUDA_CHECK(
          cudaMemcpy(data_ + offset, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
  }
  // Device elements [offset, offset + host.size()) → host.
  void download(std::span<T> host, std::size_t offset = 0) const {
    check_range(offset, host.size(), "download");
    if (!host.empty()) {
      KVAUDIT_CUDA_CHECK(
          cudaMemcpy(host.data(), data_ + offset, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
    }
  }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    download(host);
    return host;
  }
  void fill_zero() {
    if (count_ > 0) KVAUDIT_CUDA_CHECK(cudaMemset(data_, 0, bytes()));
  }

 private:
  void check_range(std::size_t offset, std::size_t count, const char* what) const {
    if (offset > count_ || count > count_ - offset) {
      throw std::out_of_range(std::string("DeviceBuffer::") + what + ": elements [" +
                              std::to_string(offset) + ", " + std::to_string(offset + count) +
                              ") outside a buffer of " + std::to_string(count_));
    }
  }
  void release() noexcept {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }

  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// Conversions use runners/model/bf16.h (round to nearest even; NaN stays NaN).
std::vector<bf16> to_bf16(std::span<const float> values);
std::vector<float> to_float(std::span<const bf16> values);
DeviceBuffer<bf16> to_device_bf16(std::span<const float> values);
// Downloads a bf16 buffer as f32.
std::vector<float> download_as_float(const DeviceBuffer<bf16>& buffer);
std::vector<float> download_as_float(const bf16* device, std::size_t count);

}  // namespace kvaudit::cuda
