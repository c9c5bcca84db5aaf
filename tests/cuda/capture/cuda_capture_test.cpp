// CudaPrefillCapture against the CPU cpu::CpuPrefillCapture fed identical Q/K/V: window queries,
// keys and values exact; query moments ≤ 1e-12 relative; the eager probabilities of the capture
// kernels vs the CPU kernels (count of differing bf16 values) and the column sums (≤ 1e-5 relative
// where the p's agree); a synthetic H=9, Hkv=3, d=64 layer at b=2048 against the CPU capture code
// path; and the capture's input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cpu/sequence_state.h"
#include "runners/cuda/capture/cuda_prefill_capture.h"
#include "runners/model/bf16.h"
#include "tests/cuda/capture/capture_test_support.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvaudit::cuda::test {
namespace {

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

template <typename T>
std::size_t count_different(std::span<const T> a, std::span<const T> b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] ? 1 : 0;
  return n;
}

double max_relative(std::span<const double> a, std::span<const double> b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(std::fabs(b[i]), 1e-300));
  return worst;
}

TEST(CudaCapture, WindowQueriesKeysValuesAndMomentsMatchCpuCapture) {
  KVAUDIT_REQUIRE_GPU();
  const TinyPrefill& p = tiny_prefill();
  ASSERT_TRUE(p.gpu_capture->complete());
  const auto inv_freq = p.model->rope_inv_freq();
  for (const int b : {kLc, kLq}) {
    const auto cpu = p.cpu_capture->layers(b, *p.state, p.weights, inv_freq);
    const auto gpu = p.gpu_capture->layers(b, p.weights, inv_freq);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (std::size_t l = 0; l < cpu.size(); ++l) {
      const std::string where = "b=" + std::to_string(b) + " layer " + std::to_string(l);
      EXPECT_EQ(gpu[l].length, cpu[l].length) << where;
      EXPECT_EQ(gpu[l].model_is_bf16, cpu[l].model_is_bf16) << where;
      EXPECT_EQ(gpu[l].hidden_size, cpu[l].hidden_size) << where;
      EXPECT_EQ(gpu[l].window_rows, cpu[l].window_rows) << where;
      EXPECT_EQ(gpu[l].query_count, cpu[l].query_count) << where;
      EXPECT_EQ(gpu[l].moments_first_row, cpu[l].moments_first_row) << where;
      EXPECT_EQ(gpu[l].o_proj.data(), cpu[l].o_proj.data()) << where;
      ASSERT_EQ(gpu[l].window_queries.size(), cpu[l].window_queries.size()) << where;
      const std::size_t window_diff = count_different(gpu[l].window_queries, cpu[l].window_queries);
      std::size_t kv_diff = 0, kv_n = 0;
      ASSERT_EQ(gpu[l].keys.size(), cpu[l].keys.size()) << where;
      for (std::size_t g = 0; g < cpu[l].keys.size(); ++g) {
        ASSERT_EQ(gpu[l].keys[g].size(), cpu[l].keys[g].size()) << where;
        ASSERT_EQ(gpu[l].values[g].size(), cpu[l].values[g].size()) << where;
        kv_diff += count_different(gpu[l].keys[g], cpu[l].keys[g]) +
                   count_different(gpu[l].values[g], cpu[l].values[g]);
        kv_n += 2 * cpu[l].keys[g].size();
      }
      ASSERT_EQ(gpu[l].query_sum.size(), cpu[l].query_sum.size()) << where;
      ASSERT_EQ(gpu[l].query_outer.size(), cpu[l].query_outer.size()) << where;
      const double sum_rel = max_relative(gpu[l].query_sum, cpu[l].query_sum);
      const double outer_rel = max_relative(gpu[l].query_outer, cpu[l].query_outer);
      std::printf(
          "[capture] %s: window queries %zu of %zu differ; K/V %zu of %zu differ; moments max "
          "rel: sum %.3e, outer %.3e\n",
          where.c_str(), window_diff, cpu[l].window_queries.size(), kv_diff, kv_n, sum_rel,
          outer_rel);
      EXPECT_EQ(window_diff, 0u) << where;
      EXPECT_EQ(kv_diff, 0u) << where;
      EXPECT_LE(sum_rel, 1e-12) << where;
      EXPECT_LE(outer_rel, 1e-12) << where;
    }
  }
}

TEST(CudaCapture, EagerProbabilitiesAndColumnSumsMatchCpuCapture) {
  KVAUDIT_REQUIRE_GPU();
  const TinyPrefill& p = tiny_prefill();
  const model::ModelConfig& c = p.weights.config;
  const bool bf16 = c.dtype == model::ComputeDtype::bf16;
  ASSERT_TRUE(bf16) << "the tiny bf16 model should compute in bf16";
  const auto inv_freq = p.model->rope_inv_freq();
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& q = p.observer->queries[sz(l)];
    const auto& k = p.observer->keys[sz(l)];
    const auto p_cpu =
        cpu_probability_matrix(q, k, c.num_heads, c.num_kv_heads, c.head_dim, kLq, bf16);
    const auto p_gpu =
        gpu_probability_matrix(q, k, c.num_heads, c.num_kv_heads, c.head_dim, kLq, bf16);
    for (const int b : {kLc, kLq}) {
      const auto cpu = p.cpu_capture->layers(b, *p.state, p.weights, inv_freq);
      const auto gpu = p.gpu_capture->layers(b, p.weights, inv_freq);
      expect_column_sums_match(gpu[sz(l)].column_sums, cpu[sz(l)].column_sums, p_gpu, p_cpu,
                               c.num_heads, kLq, b, "tiny llama bf16 layer " + std::to_string(l));
    }
  }
}

// A synthetic layer: bf16-representable queries/keys/values from an LCG (logits of a few units).
std::vector<float> lcg_bf16_values(std::size_t count, std::uint64_t seed, float amplitude) {
  std::vector<float> out(count);
  std::uint64_t x = seed;
  for (auto& v : out) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(x >> 11) * 0x1.0p-53;  // [0, 1)
    v = model::round_to_bf16(static_cast<float>((2.0 * unit - 1.0) * amplitude));
  }
  return out;
}

TEST(CudaCapture, SyntheticColumnSumsAtLength2048MatchCpuCapture) {
  KVAUDIT_REQUIRE_GPU();
  constexpr int kHeads = 9, kKvHeads = 3, kDim = 64, kRows = 2048;
  model::ModelConfig config;
  config.num_layers = 1;
  config.num_heads = kHeads;
  config.num_kv_heads = kKvHeads;
  config.head_dim = kDim;
  config.hidden_size = kHeads * kDim;
  config.vocab_size = 8;
  config.dtype = model::ComputeDtype::bf16;
  const std::size_t rows = sz(kRows);
  const auto queries = lcg_bf16_values(rows * sz(kHeads * kDim), 11, 2.0f);
  const auto keys = lcg_bf16_values(rows * sz(kKvHeads * kDim), 12, 2.0f);
  const auto values = lcg_bf16_values(rows * sz(kKvHeads * kDim), 13, 1.0f);
  std::vector<std::int32_t> positions(rows);
  for (std::size_t i = 0; i < rows; ++i) positions[i] = static_cast<std::int32_t>(i);

  unit::CaptureOptions options;
  options.boundaries = {1000, kRows};
  options.column_sums = true;

  // CPU capture code path.
  cpu::CpuPrefillCapture cpu_capture(config, options);
  cpu::PrefillLayerView view;
  view.layer = 0;
  view.num_tokens = kRows;
  view.num_heads = kHeads;
  view.num_kv_heads = kKvHeads;
  view.head_dim = kDim;
  view.positions = positions;
  view.queries = queries;
  view.keys = keys;
  view.values = values;
  cpu_capture.on_layer(view);
  cpu::KvCache cache(1, kKvHeads, kDim, 2);
  cache.append_layer(0, positions, keys, values);
  cache.commit_step(kRows);
  const cpu::SequenceState state(std::move(cache));
  model::ModelWeights weights;
  weights.config = config;
  weights.source = "synthetic";
  weights.layers.resize(1);
  const std::vector<float> inv_freq(sz(kDim / 2), 1.0f);

  // CUDA capture, the same tensors uploaded into a one-layer device cache.
  CudaPrefillCapture gpu_capture(config, options);
  std::vector<float> k_heads(sz(kKvHeads) * rows * sz(kDim)), v_heads(k_heads.size());
  std::vector<std::int32_t> slot_positions(sz(kKvHeads) * rows);
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t g = 0; g < sz(kKvHeads); ++g) {
      for (std::size_t e = 0; e < sz(kDim); ++e) {
        k_heads[(g * rows + t) * sz(kDim) + e] = keys[(t * sz(kKvHeads) + g) * sz(kDim) + e];
        v_heads[(g * rows + t) * sz(kDim) + e] = values[(t * sz(kKvHeads) + g) * sz(kDim) + e];
      }
      slot_positions[g * rows + t] = static_cast<std::int32_t>(t);
    }
  DeviceBuffer<bf16> device_keys = to_device_bf16(k_heads);
  DeviceBuffer<bf16> device_values = to_device_bf16(v_heads);
  DeviceBuffer<std::int32_t> device_slots(slot_positions.size());
  device_slots.upload(slot_positions);
  const std::vector<std::int32_t> lengths(sz(kKvHeads), kRows);
  DeviceBuffer<std::int32_t> device_lengths(lengths.size());
  device_lengths.upload(lengths);
  DeviceBuffer<std::int32_t> device_positions(rows);
  device_positions.upload(positions);
  const DeviceBuffer<bf16> device_queries = to_device_bf16(queries);
  CudaPrefillLayerView gpu_view;
  gpu_view.layer = 0;
  gpu_view.num_tokens = kRows;
  gpu_view.num_heads = kHeads;
  gpu_view.num_kv_heads = kKvHeads;
  gpu_view.head_dim = kDim;
  gpu_view.positions = device_positions.data();
  gpu_view.queries = device_queries.data();
  gpu_view.sequence = DeviceSequenceKv{.keys = device_keys.data(),
                                       .values = device_values.data(),
                                       .positions = device_slots.data(),
                                       .lengths = device_lengths.data(),
                                       .num_kv_heads = kKvHeads,
                                       .head_dim = kDim,
                                       .capacity = kRows};
  gpu_view.kv_lengths = lengths;
  gpu_view.scale = 0.125f;
  gpu_capture.on_layer(gpu_view, nullptr);

  const auto p_cpu = cpu_probability_matrix(queries, keys, kHeads, kKvHeads, kDim, kRows, true);
  const auto p_gpu = gpu_probability_matrix(queries, keys, kHeads, kKvHeads, kDim, kRows, true);
  for (const int b : options.boundaries) {
    const auto cpu = cpu_capture.layers(b, state, weights, inv_freq);
    const auto gpu = gpu_capture.layers(b, weights, inv_freq);
    expect_column_sums_match(gpu[0].column_sums, cpu[0].column_sums, p_gpu, p_cpu, kHeads, kRows, b,
                             "synthetic H=9 Hkv=3 d=64");
  }
}

TEST(CudaCapture, RejectsBadOptionsAndViews) {
  KVAUDIT_REQUIRE_GPU();
  const TinyPrefill& p = tiny_prefill();
  const model::ModelConfig& config = p.weights.config;
  unit::CaptureOptions none;
  EXPECT_THROW(CudaPrefillCapture(config, none), std::invalid_argument);
  unit::CaptureOptions negative;
  negative.boundaries = {0, 5};
  EXPECT_THROW(CudaPrefillCapture(config, negative), std::invalid_argument);
  unit::CaptureOptions too_many;
  too_many.boundaries = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_THROW(CudaPrefillCapture(config, too_many), std::invalid_argument);
  unit::CaptureOptions all_queries;  // every query row: CPU engine only (cuda_prefill_capture.h)
  all_queries.boundaries = {5};
  all_queries.all_queries = true;
  EXPECT_THROW(CudaPrefillCapture(config, all_queries), std::invalid_argument);
  unit::CaptureOptions attention_input;  // every position's input_layernorm output: CPU only
  attention_input.boundaries = {5};
  attention_input.attention_input = true;
  try {
    CudaPrefillCapture refused(config, attention_input);
    ADD_FAILURE() << "the attention-input capture was accepted on the GPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }

  unit::CaptureOptions options;
  options.boundaries = {10};
  CudaPrefillCapture capture(config, options);
  CudaPrefillLayerView view;
  view.layer = 1;  // layers must come in order from 0
  view.num_tokens = 10;
  view.num_heads = config.num_heads;
  view.num_kv_heads = config.num_kv_heads;
  view.head_dim = config.head_dim;
  try {
    capture.on_layer(view, nullptr);
    ADD_FAILURE() << "an out-of-order layer was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expected layer 0"), std::string::npos) << e.what();
  }
  view.layer = 0;
  view.num_tokens = 5;  // fewer tokens than the boundary
  EXPECT_THROW(capture.on_layer(view, nullptr), std::invalid_argument);
  EXPECT_THROW(capture.layers(10, p.weights, p.model->rope_inv_freq()), std::invalid_argument);
  EXPECT_THROW(p.gpu_capture->device_layer(0, 77), std::invalid_argument);
  EXPECT_THROW(p.gpu_capture->device_layer(5, kLc), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::cuda::test
