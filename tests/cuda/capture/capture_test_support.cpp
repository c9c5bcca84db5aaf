// Shared setup of the CUDA capture tests (capture_test_support.h).
#include "tests/cuda/capture/capture_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "runners/cpu/attention_math.h"
#include "runners/cpu/key_panels.h"
#include "runners/cuda/capture/capture_kernels.h"
#include "runners/cuda/cuda_check.h"
#include "runners/model/formats/load_weights.h"
#include "tests/cuda/test_paths.h"

namespace kvaudit::cuda::test {
namespace {

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

float eager_scale(int dim) { return static_cast<float>(std::pow(static_cast<double>(dim), -0.5)); }

}  // namespace

std::vector<std::int32_t> lcg_tokens(int count, int vocab, std::uint64_t seed) {
  std::vector<std::int32_t> ids(sz(count));
  std::uint64_t x = seed;
  for (auto& id : ids) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    id = static_cast<std::int32_t>(3 + (x >> 33) % static_cast<std::uint64_t>(vocab - 3));
  }
  return ids;
}

DualCaptureObserver::DualCaptureObserver(const model::ModelConfig& config, int capacity,
                                         cpu::CpuPrefillCapture& cpu_capture,
                                         CudaPrefillCapture& gpu_capture)
    : config_(config),
      capacity_(capacity),
      cpu_capture_(cpu_capture),
      gpu_capture_(gpu_capture),
      cache_keys_(sz(config.num_layers) * sz(config.num_kv_heads) * sz(capacity) *
                  sz(config.head_dim)),
      cache_values_(cache_keys_.size()),
      cache_positions_(sz(config.num_layers) * sz(config.num_kv_heads) * sz(capacity)),
      cache_lengths_(sz(config.num_layers) * sz(config.num_kv_heads)) {
  cache_keys_.fill_zero();
  cache_values_.fill_zero();
  cache_positions_.upload(std::vector<std::int32_t>(cache_positions_.size(), -1));
  cache_lengths_.fill_zero();
}

void DualCaptureObserver::on_layer(const cpu::PrefillLayerView& view) {
  cpu_capture_.on_layer(view);
  queries.emplace_back(view.queries.begin(), view.queries.end());
  keys.emplace_back(view.keys.begin(), view.keys.end());

  const std::size_t t_count = sz(view.num_tokens);
  const std::size_t kv_heads = sz(view.num_kv_heads);
  const std::size_t dim = sz(view.head_dim);
  const std::size_t cap = sz(capacity_);
  ASSERT_LE(t_count, cap) << "the test cache is too small";
  // Token-major [T, Hkv, d] → the device cache's [Hkv, capacity, d] slice of this layer.
  std::vector<float> k_heads(kv_heads * cap * dim, 0.0f), v_heads(kv_heads * cap * dim, 0.0f);
  std::vector<std::int32_t> positions(kv_heads * cap, -1);
  for (std::size_t t = 0; t < t_count; ++t) {
    for (std::size_t g = 0; g < kv_heads; ++g) {
      std::copy_n(view.keys.begin() + static_cast<std::ptrdiff_t>((t * kv_heads + g) * dim), dim,
                  k_heads.begin() + static_cast<std::ptrdiff_t>((g * cap + t) * dim));
      std::copy_n(view.values.begin() + static_cast<std::ptrdiff_t>((t * kv_heads + g) * dim), dim,
                  v_heads.begin() + static_cast<std::ptrdiff_t>((g * cap + t) * dim));
      positions[g * cap + t] = view.positions[t];
    }
  }
  const std::size_t layer = sz(view.layer);
  cache_keys_.upload(to_bf16(k_heads), layer * kv_heads * cap * dim);
  cache_values_.upload(to_bf16(v_heads), layer * kv_heads * cap * dim);
  cache_positions_.upload(positions, layer * kv_heads * cap);
  const std::vector<std::int32_t> lengths(kv_heads, view.num_tokens);
  cache_lengths_.upload(lengths, layer * kv_heads);

  const DeviceBuffer<bf16> device_queries = to_device_bf16(view.queries);
  const DeviceBuffer<bf16> device_pre_rope = to_device_bf16(view.queries_pre_rope);
  DeviceBuffer<std::int32_t> device_positions(t_count);
  device_positions.upload(view.positions);

  CudaPrefillLayerView gpu_view;
  gpu_view.layer = view.layer;
  gpu_view.num_tokens = view.num_tokens;
  gpu_view.num_heads = view.num_heads;
  gpu_view.num_kv_heads = view.num_kv_heads;
  gpu_view.head_dim = view.head_dim;
  gpu_view.first_position = view.positions.empty() ? 0 : view.positions.front();
  gpu_view.positions = device_positions.data();
  gpu_view.queries_pre_rope = device_pre_rope.data();
  gpu_view.queries = device_queries.data();
  gpu_view.sequence = DeviceSequenceKv{.keys = cache_keys_.data(),
                                       .values = cache_values_.data(),
                                       .positions = cache_positions_.data(),
                                       .lengths = cache_lengths_.data(),
                                       .num_kv_heads = view.num_kv_heads,
                                       .head_dim = view.head_dim,
                                       .capacity = capacity_};
  gpu_view.kv_lengths = lengths;
  gpu_view.scale = eager_scale(view.head_dim);
  gpu_capture_.on_layer(gpu_view, nullptr);
}

const TinyPrefill& tiny_prefill() {
  static const std::unique_ptr<TinyPrefill> prefill = [] {
    auto p = std::make_unique<TinyPrefill>();
    p->weights = model::load_model_weights(tiny_models_dir() / "llama" / "bf16");
    p->model = std::make_unique<cpu::CpuModel>(p->weights, AttentionBackend::eager);
    unit::CaptureOptions options;
    options.boundaries = {kLc, kLq};
    options.window_rows = kWindow;
    options.column_sums = true;
    options.query_moments = true;
    options.moments_first_row = 4;
    const model::ModelConfig& config = p->weights.config;
    p->cpu_capture = std::make_unique<cpu::CpuPrefillCapture>(config, options);
    p->gpu_capture = std::make_unique<CudaPrefillCapture>(config, options);
    p->observer =
        std::make_unique<DualCaptureObserver>(config, kTokens, *p->cpu_capture, *p->gpu_capture);
    p->state = std::make_unique<cpu::SequenceState>(p->model->new_sequence());
    const auto tokens = lcg_tokens(kTokens, config.vocab_size, 20240611);
    p->model->prefill(*p->state, tokens, LogitRows::none, p->observer.get());
    return p;
  }();
  return *prefill;
}

std::vector<float> cpu_probability_matrix(std::span<const float> queries,
                                          std::span<const float> keys, int heads, int kv_heads,
                                          int dim, int rows, bool bf16_mode) {
  const std::size_t n = sz(rows);
  const std::size_t d = sz(dim);
  const std::size_t group = sz(heads / kv_heads);
  const std::size_t stride = cpu::padded_key_count(n);
  std::vector<float> out(sz(heads) * n * n, 0.0f);
  std::vector<float> key_rows(n * d);
  std::vector<float> scores(stride);
  for (std::size_t h = 0; h < sz(heads); ++h) {
    const std::size_t g = h / group;
    for (std::size_t j = 0; j < n; ++j)
      std::copy_n(keys.begin() + static_cast<std::ptrdiff_t>((j * sz(kv_heads) + g) * d), d,
                  key_rows.begin() + static_cast<std::ptrdiff_t>(j * d));
    const std::vector<float> panels = cpu::keys_to_panels(key_rows.data(), n, d);
    for (std::size_t i = 0; i < n; ++i) {
      const float* q = queries.data() + (i * sz(heads) + h) * d;
      cpu::score_tile(q, sz(heads) * d, 1, panels.data(), 0, i + 1, d, scores.data(), stride);
      cpu::eager_probabilities(scores.data(), i + 1, eager_scale(dim), bf16_mode);
      std::copy_n(scores.begin(), i + 1,
                  out.begin() + static_cast<std::ptrdiff_t>((h * n + i) * n));
    }
  }
  return out;
}

std::vector<float> gpu_probability_matrix(std::span<const float> queries,
                                          std::span<const float> keys, int heads, int kv_heads,
                                          int dim, int rows, bool bf16_mode) {
  const std::size_t n = sz(rows);
  const std::size_t d = sz(dim);
  std::vector<float> key_heads(sz(kv_heads) * n * d);
  for (std::size_t g = 0; g < sz(kv_heads); ++g)
    for (std::size_t j = 0; j < n; ++j)
      std::copy_n(keys.begin() + static_cast<std::ptrdiff_t>((j * sz(kv_heads) + g) * d), d,
                  key_heads.begin() + static_cast<std::ptrdiff_t>((g * n + j) * d));
  const DeviceBuffer<bf16> device_queries = to_device_bf16(queries);
  DeviceBuffer<float> device_keys(key_heads.size());
  device_keys.upload(key_heads);
  DeviceBuffer<float> row_max(sz(heads) * n), row_sum(sz(heads) * n);
  DeviceBuffer<float> out(sz(heads) * n * n);
  const EagerProblem problem{.queries = device_queries.data(),
                             .keys = device_keys.data(),
                             .num_heads = heads,
                             .num_kv_heads = kv_heads,
                             .head_dim = dim,
                             .key_rows = rows,
                             .rows = rows,
                             .scale = eager_scale(dim),
                             .bf16 = bf16_mode};
  eager_row_statistics(problem, row_max.data(), row_sum.data(), nullptr);
  eager_probability_matrix(problem, row_max.data(), row_sum.data(), out.data(), nullptr);
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  return out.to_host();
}

void expect_column_sums_match(std::span<const float> gpu, std::span<const float> cpu,
                              const std::vector<float>& p_gpu, const std::vector<float>& p_cpu,
                              int heads, int rows, int boundary, const std::string& label) {
  const std::size_t b = sz(boundary);
  const std::size_t n = sz(rows);
  ASSERT_EQ(gpu.size(), sz(heads) * b) << label;
  ASSERT_EQ(cpu.size(), sz(heads) * b) << label;
  ASSERT_EQ(p_gpu.size(), sz(heads) * n * n) << label;
  ASSERT_EQ(p_cpu.size(), p_gpu.size()) << label;
  std::vector<double> delta(sz(heads) * b, 0.0);
  std::vector<char> touched(sz(heads) * b, 0);
  std::int64_t p_count = 0, p_differ = 0;
  double worst_ulps = 0.0;
  for (std::size_t h = 0; h < sz(heads); ++h) {
    for (std::size_t i = 0; i < b; ++i) {
      for (std::size_t j = 0; j <= i; ++j) {
        const float a = p_gpu[(h * n + i) * n + j];
        const float c = p_cpu[(h * n + i) * n + j];
        ++p_count;
        if (a == c) continue;
        ++p_differ;
        delta[h * b + j] += static_cast<double>(a) - static_cast<double>(c);
        touched[h * b + j] = 1;
        const double magnitude =
            std::max(std::fabs(static_cast<double>(a)), std::fabs(static_cast<double>(c)));
        const double ulp = std::ldexp(1.0, std::ilogb(magnitude) - 7);  // bf16: 8 significant bits
        worst_ulps = std::max(worst_ulps, std::fabs(static_cast<double>(a) - c) / ulp);
      }
    }
  }
  double raw = 0.0, clean = 0.0, corrected = 0.0, max_abs = 0.0;
  std::int64_t columns_touched = 0, columns_differ = 0;
  for (std::size_t k = 0; k < gpu.size(); ++k) {
    const double g = gpu[k];
    const double c = cpu[k];
    const double scale = std::max(std::fabs(c), 1e-30);
    const double rel = std::fabs(g - c) / scale;
    raw = std::max(raw, rel);
    max_abs = std::max(max_abs, std::fabs(g - c));
    columns_differ += g != c ? 1 : 0;
    if (touched[k]) {
      ++columns_touched;
    } else {
      clean = std::max(clean, rel);
    }
    corrected = std::max(corrected, std::fabs((g - c) - delta[k]) / scale);
  }
  std::printf(
      "[column sums] %s b=%d: %zu columns, %lld differ, max |d| %.3e, max rel %.3e (columns whose "
      "p all agree: %.3e; after subtracting the p differences: %.3e); p: %lld of %lld differ "
      "(max %.2f bf16 ulp), in %lld columns\n",
      label.c_str(), boundary, gpu.size(), static_cast<long long>(columns_differ), max_abs, raw,
      clean, corrected, static_cast<long long>(p_differ), static_cast<long long>(p_count),
      worst_ulps, static_cast<long long>(columns_touched));
  EXPECT_LE(clean, 1e-5) << label;
  EXPECT_LE(corrected, 1e-5) << label;
  EXPECT_LE(p_differ, p_count / 1000) << label << ": too many probabilities differ";
  EXPECT_LE(worst_ulps, 1.0) << label << ": a probability differs by more than one bf16 ulp";
}

}  // namespace kvaudit::cuda::test
