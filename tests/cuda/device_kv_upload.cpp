// Test helper: CPU KvCache → device layout of device_sequence_kv.h (device_kv_upload.h).
#include "tests/cuda/device_kv_upload.h"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace kvaudit::cuda::test {

std::span<const std::int32_t> DeviceKvCopy::layer_lengths(int layer) const {
  const std::size_t heads = static_cast<std::size_t>(descriptor.num_kv_heads);
  return std::span<const std::int32_t>(host_lengths)
      .subspan(static_cast<std::size_t>(layer) * heads, heads);
}

DeviceKvCopy upload_kv_cache(const cpu::KvCache& cache, int capacity) {
  const int layers = cache.num_layers();
  const int heads = cache.num_kv_heads();
  const std::size_t dim = static_cast<std::size_t>(cache.head_dim());
  const std::size_t slots = static_cast<std::size_t>(capacity);
  const std::size_t head_count = static_cast<std::size_t>(layers) * static_cast<std::size_t>(heads);

  __nv_bfloat16_raw nan_raw{};
  nan_raw.x = 0x7FC0;
  const bf16 nan_value(nan_raw);
  std::vector<bf16> keys(head_count * slots * dim, nan_value);
  std::vector<bf16> values(head_count * slots * dim, nan_value);
  std::vector<std::int32_t> positions(head_count * slots, -1);
  std::vector<std::int32_t> lengths(head_count, 0);
  for (int layer = 0; layer < layers; ++layer) {
    for (int h = 0; h < heads; ++h) {
      const cpu::KvHeadView view = cache.head(layer, h);
      if (view.size() > slots) {
        throw std::invalid_argument("upload_kv_cache: layer " + std::to_string(layer) + " head " +
                                    std::to_string(h) + " keeps " + std::to_string(view.size()) +
                                    " entries, more than capacity " + std::to_string(capacity));
      }
      const std::size_t index = static_cast<std::size_t>(layer) * static_cast<std::size_t>(heads) +
                                static_cast<std::size_t>(h);
      const std::vector<bf16> head_keys = to_bf16(view.keys);
      const std::vector<bf16> head_values = to_bf16(view.values);
      std::copy(head_keys.begin(), head_keys.end(),
                keys.begin() + static_cast<std::ptrdiff_t>(index * slots * dim));
      std::copy(head_values.begin(), head_values.end(),
                values.begin() + static_cast<std::ptrdiff_t>(index * slots * dim));
      std::copy(view.positions.begin(), view.positions.end(),
                positions.begin() + static_cast<std::ptrdiff_t>(index * slots));
      lengths[index] = static_cast<std::int32_t>(view.size());
    }
  }

  DeviceKvCopy copy{DeviceBuffer<bf16>(keys.size()),
                    DeviceBuffer<bf16>(values.size()),
                    DeviceBuffer<std::int32_t>(positions.size()),
                    DeviceBuffer<std::int32_t>(lengths.size()),
                    lengths,
                    DeviceSequenceKv{}};
  copy.keys.upload(keys);
  copy.values.upload(values);
  copy.positions.upload(positions);
  copy.lengths.upload(lengths);
  copy.descriptor.keys = copy.keys.data();
  copy.descriptor.values = copy.values.data();
  copy.descriptor.positions = copy.positions.data();
  copy.descriptor.lengths = copy.lengths.data();
  copy.descriptor.num_kv_heads = heads;
  copy.descriptor.head_dim = static_cast<int>(dim);
  copy.descriptor.capacity = capacity;
  return copy;
}

}  // namespace kvaudit::cuda::test
