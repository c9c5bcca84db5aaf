// Device KV-cache read-back and ragged CPU cache builders; see kv_cache_test_helpers.h.
#include "tests/cuda/kernels/kv_cache_test_helpers.h"

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda::test {

std::vector<std::int32_t> download_lengths(const DeviceKvCopy& cache, int num_layers) {
  std::vector<std::int32_t> lengths(static_cast<std::size_t>(num_layers) *
                                    static_cast<std::size_t>(cache.descriptor.num_kv_heads));
  cache.lengths.download(lengths);
  return lengths;
}

HeadContents download_head(const DeviceKvCopy& cache, int layer, int kv_head) {
  const DeviceSequenceKv& d = cache.descriptor;
  std::int32_t length = 0;
  cache.lengths.download(std::span<std::int32_t>(&length, 1), d.head_index(layer, kv_head));
  const std::size_t n = static_cast<std::size_t>(length);
  const std::size_t dim = static_cast<std::size_t>(d.head_dim);
  HeadContents head;
  head.positions.resize(n);
  cache.positions.download(head.positions, d.position_offset(layer, kv_head));
  std::vector<bf16> raw(n * dim);
  cache.keys.download(raw, d.row_offset(layer, kv_head));
  head.keys = to_float(raw);
  cache.values.download(raw, d.row_offset(layer, kv_head));
  head.values = to_float(raw);
  return head;
}

HeadContents cpu_head(const cpu::KvCache& cache, int layer, int kv_head) {
  const cpu::KvHeadView view = cache.head(layer, kv_head);
  return {std::vector<std::int32_t>(view.positions.begin(), view.positions.end()),
          std::vector<float>(view.keys.begin(), view.keys.end()),
          std::vector<float>(view.values.begin(), view.values.end())};
}

cpu::KvCache make_history_cache(int num_layers, int num_kv_heads, int head_dim, int history,
                                float amplitude, TestRandom& random) {
  cpu::KvCache cache(num_layers, num_kv_heads, head_dim, 2);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(history));
  for (int t = 0; t < history; ++t) positions[static_cast<std::size_t>(t)] = t;
  const std::size_t count =
      static_cast<std::size_t>(history) * static_cast<std::size_t>(num_kv_heads) * head_dim;
  for (int layer = 0; layer < num_layers; ++layer) {
    const std::vector<float> keys = random.bf16_values(count, -amplitude, amplitude);
    const std::vector<float> values = random.bf16_values(count, -amplitude, amplitude);
    cache.append_layer(layer, positions, keys, values);
  }
  cache.commit_step(history);
  return cache;
}

void retain_random_subsets(cpu::KvCache& cache, double fraction, TestRandom& random) {
  if (fraction >= 1.0) return;
  for (int layer = 0; layer < cache.num_layers(); ++layer) {
    for (int h = 0; h < cache.num_kv_heads(); ++h) {
      const int lh = layer * cache.num_kv_heads() + h;
      const double keep_probability = fraction * (0.6 + 0.4 * static_cast<double>(lh % 3) / 2.0);
      const cpu::KvHeadView view = cache.head(layer, h);
      std::vector<std::int32_t> keep;
      for (std::size_t i = 0; i < view.size(); ++i) {
        const bool newest = i + 1 == view.size();
        if (newest || random.uniform() < keep_probability) keep.push_back(view.positions[i]);
      }
      cache.retain(layer, h, keep);
    }
  }
}

}  // namespace kvaudit::cuda::test
