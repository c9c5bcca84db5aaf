// DeviceKvCache; see device_kv_cache.h.
#include "runners/cuda/device_kv_cache.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "runners/cuda/cuda_check.h"
#include "runners/cuda/kernels/retain_kernels.h"

namespace kvaudit::cuda {
namespace {

std::size_t checked_product(std::initializer_list<std::size_t> factors) {
  std::size_t product = 1;
  for (std::size_t f : factors) product *= f;
  return product;
}

}  // namespace

std::size_t DeviceKvCache::bytes_for(int num_layers, int num_kv_heads, int head_dim, int capacity) {
  const std::size_t slots =
      checked_product({static_cast<std::size_t>(num_layers), static_cast<std::size_t>(num_kv_heads),
                       static_cast<std::size_t>(capacity)});
  return slots * static_cast<std::size_t>(head_dim) * 2 * sizeof(bf16) +
         slots * sizeof(std::int32_t) +
         static_cast<std::size_t>(num_layers) * num_kv_heads * sizeof(std::int32_t);
}

DeviceKvCache::DeviceKvCache(int num_layers, int num_kv_heads, int head_dim, int capacity,
                             cudaStream_t stream)
    : num_layers_(num_layers),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      stream_(stream) {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0 || capacity <= 0) {
    throw std::invalid_argument(
        "DeviceKvCache: layers, KV heads, head_dim and capacity must be "
        "positive (got " +
        std::to_string(num_layers) + ", " + std::to_string(num_kv_heads) + ", " +
        std::to_string(head_dim) + ", " + std::to_string(capacity) + ")");
  }
  const std::size_t heads = static_cast<std::size_t>(num_layers) * num_kv_heads;
  const std::size_t slots = heads * static_cast<std::size_t>(capacity);
  keys_ = DeviceBuffer<bf16>(slots * static_cast<std::size_t>(head_dim));
  values_ = DeviceBuffer<bf16>(slots * static_cast<std::size_t>(head_dim));
  positions_ = DeviceBuffer<std::int32_t>(slots);
  lengths_ = DeviceBuffer<std::int32_t>(heads);
  host_lengths_.assign(heads, 0);
  host_positions_.assign(heads, {});
  KVAUDIT_CUDA_CHECK(cudaMemsetAsync(lengths_.data(), 0, lengths_.bytes(), stream_));
  descriptor_.keys = keys_.data();
  descriptor_.values = values_.data();
  descriptor_.positions = positions_.data();
  descriptor_.lengths = lengths_.data();
  descriptor_.num_kv_heads = num_kv_heads;
  descriptor_.head_dim = head_dim;
  descriptor_.capacity = capacity;
}

std::span<const std::int32_t> DeviceKvCache::lengths(int layer) const {
  if (layer < 0 || layer >= num_layers_) {
    throw std::out_of_range("DeviceKvCache::lengths: layer " + std::to_string(layer) +
                            " outside [0, " + std::to_string(num_layers_) + ")");
  }
  return std::span<const std::int32_t>(host_lengths_)
      .subspan(static_cast<std::size_t>(layer) * num_kv_heads_, num_kv_heads_);
}

std::size_t DeviceKvCache::kept_entries() const {
  std::size_t total = 0;
  for (std::int32_t n : host_lengths_) total += static_cast<std::size_t>(n);
  return total;
}

std::size_t DeviceKvCache::kept_bytes() const {
  return kept_entries() * 2 * static_cast<std::size_t>(head_dim_) * sizeof(bf16);
}

void DeviceKvCache::check_room(std::int64_t tokens) const {
  for (std::size_t i = 0; i < host_lengths_.size(); ++i) {
    if (host_lengths_[i] + tokens > capacity_) {
      throw std::length_error("DeviceKvCache: appending " + std::to_string(tokens) +
                              " tokens to layer " + std::to_string(i / num_kv_heads_) +
                              " KV head " + std::to_string(i % num_kv_heads_) + " (holding " +
                              std::to_string(host_lengths_[i]) + ") exceeds its capacity of " +
                              std::to_string(capacity_) + " entries");
    }
  }
}

void DeviceKvCache::record_append(std::int64_t tokens) {
  for (std::size_t i = 0; i < host_lengths_.size(); ++i) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      host_positions_[i].push_back(static_cast<std::int32_t>(original_length_ + t));
    }
    host_lengths_[i] += static_cast<std::int32_t>(tokens);
  }
  original_length_ += tokens;
}

// Stream-ordered after the kernels that read the old lengths. The source is pageable host memory:
// cudaMemcpyAsync has staged it when it returns, so host_lengths_ may change right after.
void DeviceKvCache::upload_lengths() {
  if (host_lengths_.empty()) return;
  KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(lengths_.data(), host_lengths_.data(),
                                     host_lengths_.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream_));
}

void DeviceKvCache::resync_lengths() noexcept {
  try {
    upload_lengths();
    KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  } catch (...) {
    // After a sticky CUDA error the context is lost anyway (CudaModel::restore_lengths).
  }
}

void DeviceKvCache::retain(std::span<const std::vector<std::int32_t>> keep) {
  const std::size_t heads = host_lengths_.size();
  if (keep.size() != heads) {
    throw std::invalid_argument("DeviceKvCache::retain: " + std::to_string(keep.size()) +
                                " keep lists for " + std::to_string(heads) +
                                " (layer, KV head) pairs");
  }
  std::vector<std::int32_t> offsets(heads + 1, 0);
  std::vector<std::int32_t> slots;
  for (std::size_t i = 0; i < heads; ++i) {
    const std::vector<std::int32_t>& held = host_positions_[i];
    std::size_t cursor = 0;
    for (std::size_t j = 0; j < keep[i].size(); ++j) {
      const std::int32_t position = keep[i][j];
      if (j > 0 && position <= keep[i][j - 1]) {
        throw std::invalid_argument(
            "DeviceKvCache::retain: layer " + std::to_string(i / num_kv_heads_) + " KV head " +
            std::to_string(i % num_kv_heads_) + ": kept positions are not strictly ascending");
      }
      while (cursor < held.size() && held[cursor] < position) ++cursor;
      if (cursor == held.size() || held[cursor] != position) {
        throw std::invalid_argument("DeviceKvCache::retain: layer " +
                                    std::to_string(i / num_kv_heads_) + " KV head " +
                                    std::to_string(i % num_kv_heads_) + ": position " +
                                    std::to_string(position) + " is not held");
      }
      slots.push_back(static_cast<std::int32_t>(cursor));
    }
    offsets[i + 1] = static_cast<std::int32_t>(slots.size());
  }
  const std::int64_t total = static_cast<std::int64_t>(slots.size());
  if (total > 0) {
    DeviceBuffer<std::int32_t> device_offsets(offsets.size());
    device_offsets.upload(offsets);
    DeviceBuffer<std::int32_t> device_slots(slots.size());
    device_slots.upload(slots);
    DeviceBuffer<bf16> scratch_keys(slots.size() * static_cast<std::size_t>(head_dim_));
    DeviceBuffer<bf16> scratch_values(slots.size() * static_cast<std::size_t>(head_dim_));
    DeviceBuffer<std::int32_t> scratch_positions(slots.size());
    compact_kv_cache(descriptor_, num_layers_, device_offsets.data(), device_slots.data(), total,
                     scratch_keys.data(), scratch_values.data(), scratch_positions.data(), stream_);
    KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // before the scratch buffers are freed
  }
  for (std::size_t i = 0; i < heads; ++i) {
    host_positions_[i] = keep[i];
    host_lengths_[i] = static_cast<std::int32_t>(keep[i].size());
  }
  upload_lengths();
}

void DeviceKvCache::truncate(std::int64_t length) {
  if (length < 0 || length > original_length_) {
    throw std::invalid_argument("DeviceKvCache::truncate: length " + std::to_string(length) +
                                " outside [0, " + std::to_string(original_length_) + "]");
  }
  for (std::size_t i = 0; i < host_positions_.size(); ++i) {
    std::vector<std::int32_t>& held = host_positions_[i];
    held.erase(std::lower_bound(held.begin(), held.end(), static_cast<std::int32_t>(length)),
               held.end());
    host_lengths_[i] = static_cast<std::int32_t>(held.size());
  }
  original_length_ = length;
  upload_lengths();
}

DeviceKvCache DeviceKvCache::clone() const {
  DeviceKvCache copy(num_layers_, num_kv_heads_, head_dim_, capacity_, stream_);
  for (int layer = 0; layer < num_layers_; ++layer) {
    for (int h = 0; h < num_kv_heads_; ++h) {
      const std::size_t n = static_cast<std::size_t>(
          host_lengths_[static_cast<std::size_t>(layer) * num_kv_heads_ + h]);
      if (n == 0) continue;
      const std::size_t row = descriptor_.row_offset(layer, h);
      const std::size_t pos = descriptor_.position_offset(layer, h);
      const std::size_t elements = n * static_cast<std::size_t>(head_dim_);
      KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(copy.keys_.data() + row, keys_.data() + row,
                                         elements * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                         stream_));
      KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(copy.values_.data() + row, values_.data() + row,
                                         elements * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                         stream_));
      KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(copy.positions_.data() + pos, positions_.data() + pos,
                                         n * sizeof(std::int32_t), cudaMemcpyDeviceToDevice,
                                         stream_));
    }
  }
  copy.original_length_ = original_length_;
  copy.host_lengths_ = host_lengths_;
  copy.host_positions_ = host_positions_;
  copy.upload_lengths();
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return copy;
}

std::unique_ptr<unit::SequenceCache> DeviceKvCache::fork() const {
  return std::make_unique<DeviceKvCache>(clone());
}

void DeviceKvCache::retain(const methods::Selection& selection) {
  unit::check_selection_shape(selection, num_layers_, num_kv_heads_);
  std::vector<std::vector<std::int32_t>> keep;
  keep.reserve(static_cast<std::size_t>(num_layers_) * static_cast<std::size_t>(num_kv_heads_));
  for (const auto& per_head : selection.kept) {
    for (const auto& kept : per_head) keep.push_back(kept);
  }
  retain(std::span<const std::vector<std::int32_t>>(keep));
}

void DeviceKvCache::download_head(int layer, int kv_head, std::vector<std::int32_t>& positions,
                                  std::vector<float>& keys, std::vector<float>& values) const {
  if (layer < 0 || layer >= num_layers_ || kv_head < 0 || kv_head >= num_kv_heads_) {
    throw std::out_of_range("DeviceKvCache::download_head: (layer " + std::to_string(layer) +
                            ", KV head " + std::to_string(kv_head) + ") outside the cache");
  }
  const std::size_t n = static_cast<std::size_t>(
      host_lengths_[static_cast<std::size_t>(layer) * num_kv_heads_ + kv_head]);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the model's appends and compactions
  positions.resize(n);
  positions_.download(positions, descriptor_.position_offset(layer, kv_head));
  keys = download_as_float(keys_.data() + descriptor_.row_offset(layer, kv_head),
                           n * static_cast<std::size_t>(head_dim_));
  values = download_as_float(values_.data() + descriptor_.row_offset(layer, kv_head),
                             n * static_cast<std::size_t>(head_dim_));
}

}  // namespace kvaudit::cuda
