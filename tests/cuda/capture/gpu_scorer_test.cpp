// GPU scorers and GPU per-head top-k against the CPU: on the layers captured by the CUDA capture of
// the tiny bf16 Llama prefill (capture_test_support.h), each GPU scorer's scores vs the CPU
// Scorer's on the SAME LayerCapture (layers(): the host copies of the device data), printed as max
// |Δ| and count; the GPU kept sets vs the CPU ScorerMethod selection (torch's tie order) at
// cr ∈ {0.25, 0.5, 0.75}, printed as overlap; the GPU top-k vs methods::top_k_positions (the same
// lower-index tie policy) exactly, including ties, NaN and ±0; and the config resolution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "methods/method.h"
#include "methods/method_factory.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"
#include "runners/cuda/capture/gpu_scorers.h"
#include "runners/cuda/capture/gpu_top_k.h"
#include "runners/cuda/cuda_check.h"
#include "tests/cuda/capture/capture_test_support.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvaudit::cuda::test {
namespace {

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

struct Case {
  methods::MethodConfig config;
  bool exact;  // no fp64 exp in the scorer: the scores must be bit-identical
};

using Params = std::map<std::string, methods::ParamValue>;

methods::MethodConfig method_config(const std::string& name, const std::string& id,
                                    const std::string& variant = "", Params params = {}) {
  methods::MethodConfig config;
  config.name = name;
  config.id = id;
  config.variant = variant;
  config.params = std::move(params);
  return config;
}

std::vector<Case> cases() {
  return {
      {method_config("knorm", "knorm"), true},
      {method_config("keydiff", "keydiff"), true},
      {method_config("observed_attention", "observed_attention"), true},
      {method_config("tova", "tova"), false},
      {method_config("tova_original", "tova", "original"), false},
      {method_config("snapkv", "snapkv", "",
                     Params{{"window", std::int64_t{kWindow}}, {"kernel_size", std::int64_t{5}}}),
       false},
      {method_config("snapkv_original", "snapkv", "original",
                     Params{{"window", std::int64_t{8}},
                            {"kernel_size", std::int64_t{7}},
                            {"pooling", std::string("max")}}),
       false},
      {method_config("expected_attention", "expected_attention"), false},
  };
}

// Max |a − b| / max(|b|, 1e-30) over differing entries and how many differ.
struct Agreement {
  double max_abs = 0.0;
  double max_rel = 0.0;
  std::size_t differ = 0;
};
Agreement agree(const std::vector<float>& a, const std::vector<float>& b) {
  Agreement out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    ++out.differ;
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    out.max_abs = std::max(out.max_abs, d);
    out.max_rel = std::max(out.max_rel, d / std::max(std::fabs(static_cast<double>(b[i])), 1e-30));
  }
  return out;
}

// The GPU scorer of a method config, chosen by the built method's typed parameters.
std::optional<GpuScorerSpec> spec_of(const methods::MethodConfig& config) {
  return gpu_scorer_for(methods::make_method(config)->parameters());
}

TEST(GpuScorers, ScoresAndKeptSetsMatchCpuScorers) {
  KVAUDIT_REQUIRE_GPU();
  const TinyPrefill& p = tiny_prefill();
  const model::ModelConfig& c = p.weights.config;
  const auto inv_freq = p.model->rope_inv_freq();
  std::size_t kept_total = 0, kept_shared = 0;
  for (const Case& test : cases()) {
    const auto spec = spec_of(test.config);
    ASSERT_TRUE(spec.has_value()) << test.config.name;
    const auto scorer = methods::make_scorer(test.config);
    std::size_t method_total = 0, method_shared = 0, n_scores = 0, n_differ = 0;
    double method_abs = 0.0, method_rel = 0.0;
    for (const int b : {kLc, kLq}) {
      const auto layers = p.gpu_capture->layers(b, p.weights, inv_freq);
      for (int l = 0; l < c.num_layers; ++l) {
        const std::string where =
            test.config.name + " b=" + std::to_string(b) + " layer " + std::to_string(l);
        const methods::LayerCapture& layer = layers[sz(l)];
        const auto cpu_scores = methods::score_layer(*scorer, layer, {}, {});
        DeviceBuffer<float> device_scores(cpu_scores.size());
        score_on_gpu(*spec, p.gpu_capture->device_layer(l, b), inv_freq, device_scores.data(),
                     nullptr);
        const std::vector<float> gpu_scores = device_scores.to_host();
        const Agreement a = agree(gpu_scores, cpu_scores);
        n_scores += cpu_scores.size();
        n_differ += a.differ;
        method_abs = std::max(method_abs, a.max_abs);
        method_rel = std::max(method_rel, a.max_rel);
        if (test.exact) {
          EXPECT_EQ(a.differ, 0u) << where << ": max |d| " << a.max_abs;
        } else {
          // fp64 exp may differ by an ulp: at most a rounding step of the output format
          // (bf16 where the scorer rounds to it), on few entries.
          EXPECT_LE(a.max_rel, 0x1.0p-7) << where;
          EXPECT_LE(a.differ, cpu_scores.size() / 100 + 2) << where;
        }

        for (const double cr : {0.25, 0.5, 0.75}) {
          const std::int64_t n_kept = methods::kept_count(b, cr);
          const auto cpu_kept = methods::per_head_top_k(cpu_scores, c.num_kv_heads, b, n_kept);
          const auto gpu_kept =
              select_top_k_on_gpu(device_scores.data(), c.num_kv_heads, b, n_kept, nullptr);
          ASSERT_EQ(gpu_kept.size(), cpu_kept.size()) << where;
          for (std::size_t g = 0; g < cpu_kept.size(); ++g) {
            const std::span<const float> head_gpu(gpu_scores.data() + g * sz(b), sz(b));
            const std::span<const float> head_cpu(cpu_scores.data() + g * sz(b), sz(b));
            // The GPU top-k is exactly the lower-index policy on its own scores.
            EXPECT_EQ(gpu_kept[g], methods::top_k_positions(head_gpu, n_kept))
                << where << " cr " << cr << " head " << g;
            std::vector<std::int32_t> common;
            std::set_intersection(gpu_kept[g].begin(), gpu_kept[g].end(), cpu_kept[g].begin(),
                                  cpu_kept[g].end(), std::back_inserter(common));
            method_total += sz(static_cast<int>(n_kept));
            method_shared += common.size();
            // Exact where the cut is not a tie (and the scores agree).
            std::vector<float> sorted(head_cpu.begin(), head_cpu.end());
            std::sort(sorted.begin(), sorted.end(), std::greater<float>());
            const bool tie_at_cut = n_kept < b && sorted[sz(static_cast<int>(n_kept)) - 1] ==
                                                      sorted[sz(static_cast<int>(n_kept))];
            const bool same_scores = std::equal(head_gpu.begin(), head_gpu.end(), head_cpu.begin());
            if (!tie_at_cut && same_scores) {
              EXPECT_EQ(gpu_kept[g], cpu_kept[g]) << where << " cr " << cr << " head " << g;
            }
          }
        }
      }
    }
    std::printf(
        "[scorer] %s: scores %zu of %zu differ, max |d| %.3e, max rel %.3e; kept-set overlap "
        "%.4f (%zu of %zu)\n",
        test.config.name.c_str(), n_differ, n_scores, method_abs, method_rel,
        static_cast<double>(method_shared) / static_cast<double>(method_total), method_shared,
        method_total);
    kept_total += method_total;
    kept_shared += method_shared;
  }
  const double overlap = static_cast<double>(kept_shared) / static_cast<double>(kept_total);
  std::printf("[scorer] overall kept-set overlap %.4f (%zu of %zu)\n", overlap, kept_shared,
              kept_total);
  EXPECT_GE(overlap, 0.99);
}

TEST(GpuTopK, EqualsLowerIndexPolicyWithTiesNanAndSignedZero) {
  KVAUDIT_REQUIRE_GPU();
  constexpr int kHeads = 3, kLength = 1500;
  std::vector<float> scores(sz(kHeads) * sz(kLength));
  std::uint64_t x = 7;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const int bucket = static_cast<int>((x >> 33) % 40);  // few distinct values: many ties
    scores[i] = static_cast<float>(bucket - 20) * 0.25f;
    if (bucket == 0) scores[i] = std::numeric_limits<float>::quiet_NaN();
    if (bucket == 1) scores[i] = -0.0f;
    if (bucket == 2) scores[i] = 0.0f;
    if (bucket == 3) scores[i] = -std::numeric_limits<float>::infinity();
  }
  DeviceBuffer<float> device(scores.size());
  device.upload(scores);
  for (const std::int64_t k : {std::int64_t{1}, std::int64_t{7}, std::int64_t{700},
                               std::int64_t{1499}, std::int64_t{1500}}) {
    const auto kept = select_top_k_on_gpu(device.data(), kHeads, kLength, k, nullptr);
    ASSERT_EQ(kept.size(), sz(kHeads));
    std::size_t mismatches = 0;
    for (std::size_t g = 0; g < sz(kHeads); ++g) {
      const std::span<const float> head(scores.data() + g * sz(kLength), sz(kLength));
      const auto expected = methods::top_k_positions(head, k);
      mismatches += kept[g] == expected ? 0 : 1;
      EXPECT_EQ(kept[g], expected) << "k " << k << " head " << g;
    }
    std::printf("[top-k] L=%d k=%lld: %zu of %d heads differ from top_k_positions\n", kLength,
                static_cast<long long>(k), mismatches, kHeads);
  }
  EXPECT_THROW(select_top_k_on_gpu(device.data(), kHeads, kLength, kLength + 1, nullptr),
               std::invalid_argument);
  EXPECT_TRUE(select_top_k_on_gpu(device.data(), kHeads, kLength, 0, nullptr)[0].empty());
}

// Host code only: runs without a GPU.
TEST(GpuScorers, ChosenByTheMethodsTypedParameters) {
  for (const Case& test : cases())
    EXPECT_TRUE(spec_of(test.config).has_value()) << test.config.name;
  const auto snap = spec_of(method_config("", "snapkv"));
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->snapkv.window, 64);  // catalogue default (kvpress)
  EXPECT_EQ(snap->snapkv.kernel_size, 5);
  const auto expected = spec_of(method_config("", "expected_attention"));
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(expected->expected.n_sink, 4);
  EXPECT_EQ(expected->expected.n_future_positions, 512);
  EXPECT_FALSE(spec_of(method_config("", "keydiff", "block")).has_value());
  EXPECT_FALSE(spec_of(method_config("", "streaming_llm")).has_value());
  // An invalid config never gets as far as a GPU scorer: resolving it throws.
  EXPECT_THROW(spec_of(method_config("", "no_such_method")), std::invalid_argument);
  EXPECT_THROW(spec_of(method_config("", "snapkv", "", Params{{"kernel_size", std::int64_t{4}}})),
               std::invalid_argument);
}

TEST(GpuScorers, CaptureWithoutWhatTheScorerReadsIsRefused) {
  KVAUDIT_REQUIRE_GPU();
  // A capture without what a scorer reads is refused with the scorer's name.
  const TinyPrefill& p = tiny_prefill();
  DeviceLayerCapture layer = p.gpu_capture->device_layer(0, kLc);
  layer.column_sums = nullptr;
  DeviceBuffer<float> scores(sz(layer.num_kv_heads) * sz(layer.length));
  try {
    score_on_gpu(*spec_of(method_config("", "observed_attention")), layer, {}, scores.data(),
                 nullptr);
    ADD_FAILURE() << "missing column sums were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("observed_attention"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::cuda::test
