// The all-queries capture (CaptureOptions::all_queries → LayerCapture::queries, queries_prerope,
// keys_prerope; read by non_causal_attention, leverage, compactor, cap) on the tiny golden Llama,
// f32 and bf16, eager and sdpa:
//  * every captured row equals the model's own tensors of a plain prefill (bitwise), and the
//    window queries are the last rows of `queries`;
//  * the captured queries are the ones attention used: the eager column sums recomputed from
//    `queries` and the cached keys equal the capture's column_sums (f32: 1e-5; bf16: HF's bf16
//    rounding points make them approximate, checked to 2e-2), and RoPE of the pre-RoPE rows gives
//    the post-RoPE queries and the cached keys;
//  * nothing is kept unless asked; the unit runner asks when a cell's method needs it (the
//    fan-out, which ORs needs_all_queries over its cells, equals the naive per-cell route).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using testing::load_tiny_model;
using testing::random_tokens;

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

// A plain prefill's pre- and post-RoPE queries and keys, token-major [T, heads, d].
class PreRopeRecorder : public cpu::PrefillObserver {
 public:
  bool wants_pre_rope_queries() const override { return true; }
  void on_layer(const cpu::PrefillLayerView& view) override {
    queries_pre_rope.emplace_back(view.queries_pre_rope.begin(), view.queries_pre_rope.end());
    keys_pre_rope.emplace_back(view.keys_pre_rope.begin(), view.keys_pre_rope.end());
    queries.emplace_back(view.queries.begin(), view.queries.end());
    keys.emplace_back(view.keys.begin(), view.keys.end());
  }
  std::vector<std::vector<float>> queries_pre_rope, keys_pre_rope, queries, keys;
};

// HF RoPE of one row at `position` (rotate_half convention), in double.
std::vector<double> rotate(const float* x, int position, std::span<const float> inv_freq) {
  const std::size_t half = inv_freq.size();
  std::vector<double> out(2 * half);
  for (std::size_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(static_cast<float>(position) * inv_freq[i]);
    out[i] = x[i] * std::cos(theta) - x[i + half] * std::sin(theta);
    out[i + half] = x[i + half] * std::cos(theta) + x[i] * std::sin(theta);
  }
  return out;
}

struct Variant {
  std::string dtype;
  AttentionBackend backend;
};

TEST(AllQueriesCaptureTest, RowsEqualTheModelsAndExplainItsAttention) {
  for (const Variant& v :
       {Variant{"f32", AttentionBackend::eager}, Variant{"f32", AttentionBackend::sdpa},
        Variant{"bf16", AttentionBackend::eager}, Variant{"bf16", AttentionBackend::sdpa}}) {
    const std::string where = v.dtype + (v.backend == AttentionBackend::eager ? " eager" : " sdpa");
    const bool bf16 = v.dtype == "bf16";
    const model::ModelWeights weights = load_tiny_model("llama", v.dtype);
    CpuModel model(weights, v.backend);
    const auto& c = model.config();
    const std::vector<std::int32_t> tokens = random_tokens(70, c.vocab_size, 3);
    const int window = 12;

    auto plain = model.new_sequence();
    PreRopeRecorder recorded;
    model.prefill(plain, tokens, LogitRows::none, &recorded);

    CaptureOptions options;
    options.boundaries = {70, 50};
    options.window_rows = window;
    options.column_sums = true;
    options.all_queries = true;
    cpu::CpuPrefillCapture capture(c, options);
    EXPECT_TRUE(capture.wants_pre_rope_queries());
    auto state = model.new_sequence();
    model.prefill(state, tokens, LogitRows::none, &capture);

    const std::size_t d = sz(c.head_dim), heads = sz(c.num_heads), kv = sz(c.num_kv_heads);
    const std::size_t group = heads / kv;
    const float scale = static_cast<float>(std::pow(static_cast<double>(c.head_dim), -0.5));
    for (const int b : {50, 70}) {
      const auto layers = capture.layers(b, state, weights, model.rope_inv_freq());
      for (const methods::LayerCapture& layer : layers) {
        const std::size_t l = sz(layer.layer), L = sz(b);
        ASSERT_EQ(layer.queries.size(), heads * L * d) << where;
        ASSERT_EQ(layer.queries_prerope.size(), heads * L * d) << where;
        ASSERT_EQ(layer.keys_prerope.size(), kv * L * d) << where;
        for (std::size_t i = 0; i < L; ++i) {
          for (std::size_t e = 0; e < d; ++e) {
            for (std::size_t h = 0; h < heads; ++h) {
              const std::size_t ours = (h * L + i) * d + e, model_row = (i * heads + h) * d + e;
              ASSERT_EQ(layer.queries[ours], recorded.queries[l][model_row]) << where;
              ASSERT_EQ(layer.queries_prerope[ours], recorded.queries_pre_rope[l][model_row])
                  << where;
            }
            for (std::size_t g = 0; g < kv; ++g)
              ASSERT_EQ(layer.keys_prerope[(g * L + i) * d + e],
                        recorded.keys_pre_rope[l][(i * kv + g) * d + e])
                  << where;
          }
        }
        // The window queries are the last rows of `queries`.
        for (std::size_t h = 0; h < heads; ++h)
          for (std::size_t r = 0; r < sz(window); ++r)
            for (std::size_t e = 0; e < d; ++e)
              ASSERT_EQ(layer.window_queries[(h * sz(window) + r) * d + e],
                        layer.queries[(h * L + (L - sz(window) + r)) * d + e])
                  << where;
        // RoPE of the pre-RoPE rows: the post-RoPE queries and the cached keys.
        const double tolerance = bf16 ? 0.05 : 1e-4;
        for (std::size_t i = 0; i < L; ++i) {
          for (std::size_t h = 0; h < heads; ++h) {
            const auto q = rotate(layer.queries_prerope.data() + (h * L + i) * d,
                                  static_cast<int>(i), layer.rope_inv_freq);
            for (std::size_t e = 0; e < d; ++e)
              ASSERT_NEAR(layer.queries[(h * L + i) * d + e], q[e],
                          tolerance * (1.0 + std::abs(q[e])))
                  << where;
          }
          for (std::size_t g = 0; g < kv; ++g) {
            const auto k = rotate(layer.keys_prerope.data() + (g * L + i) * d, static_cast<int>(i),
                                  layer.rope_inv_freq);
            for (std::size_t e = 0; e < d; ++e)
              ASSERT_NEAR(layer.keys[g][i * d + e], k[e], tolerance * (1.0 + std::abs(k[e])))
                  << where;
          }
        }
        // Attention recomputed from the captured queries: Σ_{i<b} softmax_i(q_i·k/√d)[j].
        for (std::size_t h = 0; h < heads; ++h) {
          std::vector<double> sums(L, 0.0);
          for (std::size_t i = 0; i < L; ++i) {
            std::vector<double> p(i + 1);
            double top = -1e300, total = 0.0;
            for (std::size_t j = 0; j <= i; ++j) {
              double dot = 0.0;
              for (std::size_t e = 0; e < d; ++e)
                dot += static_cast<double>(layer.queries[(h * L + i) * d + e]) *
                       layer.keys[h / group][j * d + e];
              p[j] = dot * scale;
              top = std::max(top, p[j]);
            }
            for (double& x : p) total += (x = std::exp(x - top));
            for (std::size_t j = 0; j <= i; ++j) sums[j] += p[j] / total;
          }
          for (std::size_t j = 0; j < L; ++j)
            ASSERT_NEAR(layer.column_sums[h * L + j], sums[j], bf16 ? 2e-2 * (1 + sums[j]) : 1e-5)
                << where << " layer " << l << " head " << h << " column " << j;
        }
      }
    }
  }
}

TEST(AllQueriesCaptureTest, NothingIsKeptUnlessAsked) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  CaptureOptions options;
  options.boundaries = {20};
  cpu::CpuPrefillCapture capture(model.config(), options);
  EXPECT_FALSE(capture.wants_pre_rope_queries());
  auto state = model.new_sequence();
  model.prefill(state, random_tokens(20, model.config().vocab_size, 4), LogitRows::none, &capture);
  for (const auto& layer : capture.layers(20, state, weights, model.rope_inv_freq())) {
    EXPECT_TRUE(layer.queries.empty());
    EXPECT_TRUE(layer.queries_prerope.empty());
    EXPECT_TRUE(layer.keys_prerope.empty());
  }
}

methods::MethodConfig config(std::string id, std::map<std::string, methods::ParamValue> params) {
  return methods::MethodConfig{id, id, "", std::move(params)};
}

TEST(AllQueriesCaptureTest, TheUnitRunnerCapturesThemForTheMethodsThatAsk) {
  std::vector<std::unique_ptr<methods::Method>> all;
  all.push_back(
      methods::make_method(config("non_causal_attention", {{"chunk_size", std::int64_t{32}}})));
  all.push_back(methods::make_method(config("leverage", {})));
  all.push_back(methods::make_method(config("compactor", {{"chunk_size", std::int64_t{32}}})));
  all.push_back(methods::make_method(config("cap", {})));
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (const auto& method : all)
    for (const double cr : {0.5, 0.9})
      for (const Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    CpuModel model(weights, AttentionBackend::sdpa);
    UnitTokens tokens;
    tokens.context = random_tokens(60, model.config().vocab_size, 5);
    tokens.question = random_tokens(10, model.config().vocab_size, 6);
    tokens.suffix = random_tokens(3, model.config().vocab_size, 7);
    UnitRunOptions options;
    options.decode.max_new_tokens = 4;
    options.seed = 42;
    const UnitResult result =
        testing::expect_fan_out_equals_naive(model, weights, tokens, cells, options, dtype);
    for (const CellResult& cell : result.cells)
      EXPECT_EQ(cell.status, CellStatus::ok) << dtype << " " << cell.error;
  }
}

}  // namespace
}  // namespace kvaudit::unit
