// rope_split_append (+ advance_lengths) against the CPU: q_out vs cpu::apply_rope (Rounding::bf16),
// q_pre_rope vs the projection's q, and the device cache after the append vs a cpu::KvCache that
// appended the same RoPE'd keys and values. Two sequences with different ragged histories (append,
// keep a random subset per head) take rows interleaved in one launch; the appended layer's heads
// must hold exactly the CPU's positions, keys and values, the other layer must be untouched.
// RoPE is the same rounded f32 arithmetic on both sides: exact agreement is required.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cpu/rope.h"
#include "runners/model/rope_tables.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"
#include "runners/cuda/kernels/kernels.h"
#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/kernels/bf16_agreement.h"
#include "tests/cuda/kernels/kv_cache_test_helpers.h"
#include "tests/cuda/kernels/test_data.h"

namespace kvaudit::cuda::test {
namespace {

constexpr int kLayers = 2;
constexpr int kLayer = 1;

struct NewRow {
  int sequence;
  int offset;  // index among the sequence's new rows
};

void expect_same_head(const HeadContents& expected, const HeadContents& actual,
                      const std::string& where) {
  EXPECT_EQ(actual.positions, expected.positions) << where;
  const Bf16Agreement keys = compare_bf16(expected.keys, actual.keys);
  const Bf16Agreement values = compare_bf16(expected.values, actual.values);
  EXPECT_EQ(keys.count, expected.keys.size()) << where;
  EXPECT_EQ(keys.differing, 0u) << where << ": keys";
  EXPECT_EQ(values.differing, 0u) << where << ": values";
}

void check_rope_split_append(const ModelShape& shape, const model::RopeConfig& rope,
                             bool with_pre_rope) {
  const int H = shape.heads;
  const int Hkv = shape.kv_heads;
  const int d = shape.head_dim;
  const std::size_t dim = static_cast<std::size_t>(d);
  TestRandom random(71 + static_cast<std::uint64_t>(H));

  // Two ragged histories and their new rows, interleaved: A0 B0 A1 B1 A2 B2 A3 A4.
  const std::vector<int> histories = {3000, 13};
  const std::vector<int> new_counts = {5, 3};
  std::vector<cpu::KvCache> caches;
  for (const int history : histories) {
    caches.push_back(make_history_cache(kLayers, Hkv, d, history, 2.0f, random));
    retain_random_subsets(caches.back(), 0.8, random);
  }
  std::vector<NewRow> rows;
  for (int k = 0; k < std::max(new_counts[0], new_counts[1]); ++k) {
    for (int s = 0; s < 2; ++s) {
      if (k < new_counts[static_cast<std::size_t>(s)]) rows.push_back({s, k});
    }
  }
  const int T = static_cast<int>(rows.size());
  std::vector<std::int32_t> positions, row_sequence, row_offset;
  for (const NewRow& row : rows) {
    positions.push_back(
        static_cast<std::int32_t>(histories[static_cast<std::size_t>(row.sequence)] + row.offset));
    row_sequence.push_back(row.sequence);
    row_offset.push_back(row.offset);
  }

  // cos/sin for every position up to the largest one (rope_cos_sin, bf16-rounded).
  const int max_position = *std::max_element(positions.begin(), positions.end()) + 1;
  const std::vector<float> inv_freq = model::rope_inv_freq(rope, d);
  std::vector<std::int32_t> all_positions(static_cast<std::size_t>(max_position));
  for (int p = 0; p < max_position; ++p) all_positions[static_cast<std::size_t>(p)] = p;
  std::vector<float> cos_table(static_cast<std::size_t>(max_position) * dim);
  std::vector<float> sin_table(cos_table.size());
  model::rope_cos_sin(inv_freq, all_positions, model::Rounding::bf16, cos_table, sin_table);

  const std::size_t width = static_cast<std::size_t>(H + 2 * Hkv) * dim;
  const std::vector<float> qkv = random.bf16_values(static_cast<std::size_t>(T) * width, -3, 3);

  // ---- CPU reference ----
  std::vector<float> q_raw, q_expected;
  std::vector<cpu::KvCache> expected_caches = caches;
  std::vector<std::vector<float>> new_keys(2), new_values(2);
  std::vector<std::vector<std::int32_t>> new_positions(2);
  for (int t = 0; t < T; ++t) {
    const std::size_t p = static_cast<std::size_t>(positions[static_cast<std::size_t>(t)]);
    const std::span<const float> cos_row(cos_table.data() + p * dim, dim);
    const std::span<const float> sin_row(sin_table.data() + p * dim, dim);
    const float* row = qkv.data() + static_cast<std::size_t>(t) * width;
    std::vector<float> q(row, row + H * dim);
    q_raw.insert(q_raw.end(), q.begin(), q.end());
    cpu::apply_rope(q, H, d, cos_row, sin_row, cpu::Rounding::bf16);
    q_expected.insert(q_expected.end(), q.begin(), q.end());
    std::vector<float> k(row + H * dim, row + (H + Hkv) * dim);
    cpu::apply_rope(k, Hkv, d, cos_row, sin_row, cpu::Rounding::bf16);
    const std::size_t s = static_cast<std::size_t>(rows[static_cast<std::size_t>(t)].sequence);
    new_keys[s].insert(new_keys[s].end(), k.begin(), k.end());
    new_values[s].insert(new_values[s].end(), row + (H + Hkv) * dim, row + width);
    new_positions[s].push_back(static_cast<std::int32_t>(p));
  }
  for (std::size_t s = 0; s < 2; ++s) {
    expected_caches[s].append_layer(kLayer, new_positions[s], new_keys[s], new_values[s]);
  }

  // ---- GPU ----
  std::vector<DeviceKvCopy> device_caches;
  std::vector<DeviceSequenceKv> descriptors;
  for (const cpu::KvCache& cache : caches) {
    device_caches.push_back(upload_kv_cache(cache, histories[0] + 16));
    descriptors.push_back(device_caches.back().descriptor);
  }
  DeviceBuffer<DeviceSequenceKv> device_sequences(descriptors.size());
  device_sequences.upload(descriptors);
  DeviceBuffer<bf16> device_qkv = to_device_bf16(qkv);
  DeviceBuffer<float> device_cos(cos_table.size()), device_sin(sin_table.size());
  device_cos.upload(cos_table);
  device_sin.upload(sin_table);
  DeviceBuffer<std::int32_t> device_positions(positions.size()), device_row_sequence(rows.size()),
      device_row_offset(rows.size()), device_new_tokens(2);
  device_positions.upload(positions);
  device_row_sequence.upload(row_sequence);
  device_row_offset.upload(row_offset);
  device_new_tokens.upload(std::vector<std::int32_t>(new_counts.begin(), new_counts.end()));
  DeviceBuffer<bf16> device_q(q_expected.size());
  DeviceBuffer<bf16> device_q_pre(with_pre_rope ? q_expected.size() : 0);
  rope_split_append(device_qkv.data(), T, H, Hkv, d, device_cos.data(), device_sin.data(),
                    device_positions.data(), device_row_sequence.data(), device_row_offset.data(),
                    device_sequences.data(), kLayer, device_q.data(),
                    with_pre_rope ? device_q_pre.data() : nullptr, nullptr);
  advance_lengths(device_sequences.data(), 2, kLayer, device_new_tokens.data(), nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());

  const Bf16Agreement q_agreement = compare_bf16(q_expected, download_as_float(device_q));
  print_agreement(std::string("rope_split_append q ") + shape.name, q_agreement);
  EXPECT_EQ(q_agreement.differing, 0u) << "RoPE must match cpu::apply_rope bit for bit";
  if (with_pre_rope) {
    EXPECT_EQ(compare_bf16(q_raw, download_as_float(device_q_pre)).differing, 0u)
        << "q_pre_rope must be the projection's q";
  }
  std::size_t compared_entries = 0;
  for (std::size_t s = 0; s < 2; ++s) {
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int h = 0; h < Hkv; ++h) {
        const std::string where = std::string(shape.name) + " sequence " + std::to_string(s) +
                                  ", layer " + std::to_string(layer) + ", head " +
                                  std::to_string(h);
        // The appended layer holds the CPU's appended cache; the other layer is unchanged.
        const HeadContents expected = cpu_head(expected_caches[s], layer, h);
        const HeadContents actual = download_head(device_caches[s], layer, h);
        ASSERT_EQ(actual.positions.size(), expected.positions.size()) << where;
        expect_same_head(expected, actual, where);
        compared_entries += actual.positions.size();
      }
    }
  }
  std::printf("[agreement] rope_split_append cache %s: %zu entries compared exactly\n", shape.name,
              compared_entries);
}

TEST(CudaRopeSplitAppend, MatchesCpuRopeAndRaggedAppendSmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  model::RopeConfig rope;
  rope.theta = 100000.0;
  check_rope_split_append(kSmolLM2, rope, /*with_pre_rope=*/false);
}

TEST(CudaRopeSplitAppend, MatchesCpuLlama3RopeAndRaggedAppendLlama8B) {
  KVAUDIT_REQUIRE_GPU();
  model::RopeConfig rope;
  rope.theta = 500000.0;
  rope.scaling = model::RopeScalingType::llama3;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 8192;
  check_rope_split_append(kLlama8B, rope, /*with_pre_rope=*/true);
}

}  // namespace
}  // namespace kvaudit::cuda::test
