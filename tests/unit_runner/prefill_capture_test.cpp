// Tests of cpu::CpuPrefillCapture on the tiny golden Llama (f32 and bf16, both attention backends):
// captured window queries, keys and values equal a plain prefill's; column sums equal a brute-force
// HF-eager attention; query moments equal a brute-force fp64 sum; the data of boundary Lc from the
// long prefill equals that of a prefill of only the first Lc tokens (bitwise); and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "runners/model/bf16.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using cpu::SequenceState;
using testing::load_tiny_model;
using testing::random_tokens;
using testing::RecordingObserver;

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

template <typename T>
std::vector<T> to_vector(std::span<const T> s) {
  return {s.begin(), s.end()};
}

// HF eager probabilities of one row, written independently of the CPU kernels:
// s = [q·k], s = [s·scale], p = [softmax_fp32(s)] (brackets: bf16 rounding when bf16).
std::vector<double> eager_row(const float* q, const std::vector<const float*>& keys, int dim,
                              bool bf16) {
  auto round = [bf16](float x) { return bf16 ? model::round_to_bf16(x) : x; };
  const float scale = static_cast<float>(std::pow(static_cast<double>(dim), -0.5));
  std::vector<float> s(keys.size());
  for (std::size_t j = 0; j < keys.size(); ++j) {
    double dot = 0.0;
    for (int e = 0; e < dim; ++e) dot += static_cast<double>(q[e]) * keys[j][e];
    s[j] = round(round(static_cast<float>(dot)) * scale);
  }
  const float top = *std::max_element(s.begin(), s.end());
  float total = 0.0f;
  std::vector<float> ex(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) total += ex[j] = std::exp(s[j] - top);
  std::vector<double> p(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) p[j] = round(ex[j] / total);
  return p;
}

struct Variant {
  std::string dtype;
  AttentionBackend backend;
};

const Variant kVariants[] = {{"f32", AttentionBackend::eager},
                             {"f32", AttentionBackend::sdpa},
                             {"bf16", AttentionBackend::eager},
                             {"bf16", AttentionBackend::sdpa}};

std::string describe(const Variant& v) {
  return v.dtype + (v.backend == AttentionBackend::eager ? " eager" : " sdpa");
}

CaptureOptions everything(std::vector<int> boundaries, int window) {
  CaptureOptions options;
  options.boundaries = std::move(boundaries);
  options.window_rows = window;
  options.column_sums = true;
  options.query_moments = true;
  return options;
}

TEST(PrefillCaptureTest, WindowQueriesKeysAndValuesEqualAPlainPrefill) {
  for (const Variant& variant : kVariants) {
    const model::ModelWeights weights = load_tiny_model("llama", variant.dtype);
    CpuModel model(weights, variant.backend);
    const auto& c = model.config();
    const std::vector<std::int32_t> tokens = random_tokens(70, c.vocab_size, 1);
    const int lc = 50, lq = 70, window = 12;

    SequenceState plain = model.new_sequence();
    RecordingObserver recorded;
    model.prefill(plain, tokens, LogitRows::none, &recorded);
    SequenceState captured_state = model.new_sequence();
    cpu::CpuPrefillCapture capture(c, everything({lq, lc}, window));
    model.prefill(captured_state, tokens, LogitRows::none, &capture);
    ASSERT_TRUE(capture.complete());
    EXPECT_EQ(capture.options().boundaries, (std::vector<int>{lc, lq}));  // sorted

    for (int b : {lc, lq}) {
      const auto layers = capture.layers(b, captured_state, weights, model.rope_inv_freq());
      ASSERT_EQ(layers.size(), sz(c.num_layers));
      for (const methods::LayerCapture& layer : layers) {
        const std::size_t l = sz(layer.layer), d = sz(c.head_dim), heads = sz(c.num_heads);
        const std::size_t kv = sz(c.num_kv_heads);
        EXPECT_EQ(layer.length, b);
        EXPECT_EQ(layer.model_is_bf16, variant.dtype == "bf16");
        ASSERT_EQ(layer.window_rows, window);
        ASSERT_EQ(layer.window_queries.size(), heads * sz(window) * d);
        for (std::size_t h = 0; h < heads; ++h)
          for (int r = 0; r < window; ++r)
            for (std::size_t e = 0; e < d; ++e) {
              const std::size_t row = sz(b - window + r);
              ASSERT_EQ(layer.window_queries[(h * sz(window) + sz(r)) * d + e],
                        recorded.queries[l][(row * heads + h) * d + e])
                  << describe(variant) << " b " << b << " layer " << l << " head " << h;
            }
        ASSERT_EQ(layer.keys.size(), kv);
        for (std::size_t g = 0; g < kv; ++g) {
          ASSERT_EQ(layer.keys[g].size(), sz(b) * d);
          ASSERT_EQ(layer.values[g].size(), sz(b) * d);
          // Views into the state's own cache, no copy.
          EXPECT_EQ(layer.keys[g].data(),
                    captured_state.kv_cache().head(layer.layer, static_cast<int>(g)).keys.data());
          for (std::size_t j = 0; j < sz(b); ++j)
            for (std::size_t e = 0; e < d; ++e) {
              ASSERT_EQ(layer.keys[g][j * d + e], recorded.keys[l][(j * kv + g) * d + e]);
              ASSERT_EQ(layer.values[g][j * d + e], recorded.values[l][(j * kv + g) * d + e]);
            }
        }
        EXPECT_EQ(to_vector(layer.o_proj), weights.layers[l].o_proj);
        EXPECT_EQ(to_vector(layer.rope_inv_freq), to_vector(model.rope_inv_freq()));
        EXPECT_EQ(layer.hidden_size, c.hidden_size);
      }
    }
  }
}

TEST(PrefillCaptureTest, ColumnSumsEqualBruteForceEagerAttention) {
  for (const Variant& variant : kVariants) {
    const model::ModelWeights weights = load_tiny_model("llama", variant.dtype);
    CpuModel model(weights, variant.backend);
    const auto& c = model.config();
    const bool bf16 = variant.dtype == "bf16";
    const std::vector<std::int32_t> tokens = random_tokens(61, c.vocab_size, 2);
    const int lc = 37, lq = 58;  // T = 61 > Lq: rows after Lq are not summed
    SequenceState state = model.new_sequence();
    RecordingObserver recorded;
    model.prefill(state, tokens, LogitRows::none, &recorded);
    SequenceState captured_state = model.new_sequence();
    cpu::CpuPrefillCapture capture(c, everything({lc, lq}, 4));
    model.prefill(captured_state, tokens, LogitRows::none, &capture);

    const std::size_t d = sz(c.head_dim), heads = sz(c.num_heads), kv = sz(c.num_kv_heads);
    for (int b : {lc, lq}) {
      const auto layers = capture.layers(b, captured_state, weights, model.rope_inv_freq());
      for (const methods::LayerCapture& layer : layers) {
        const std::size_t l = sz(layer.layer);
        ASSERT_EQ(layer.column_sums.size(), heads * sz(b));
        double worst = 0.0, total_error = 0.0;
        for (std::size_t h = 0; h < heads; ++h) {
          const std::size_t g = h / (heads / kv);
          std::vector<double> expected(sz(b), 0.0);
          for (std::size_t i = 0; i < sz(b); ++i) {
            std::vector<const float*> keys;
            for (std::size_t j = 0; j <= i; ++j)
              keys.push_back(&recorded.keys[l][(j * kv + g) * d]);
            const std::vector<double> p =
                eager_row(&recorded.queries[l][(i * heads + h) * d], keys, c.head_dim, bf16);
            for (std::size_t j = 0; j <= i; ++j) expected[j] += p[j];
          }
          double row_total = 0.0;
          for (std::size_t j = 0; j < sz(b); ++j) {
            const double got = layer.column_sums[h * sz(b) + j];
            row_total += got;
            worst = std::max(worst, std::abs(got - expected[j]));
            total_error += std::abs(got - expected[j]);
          }
          // Every row of A sums to 1 (bf16: up to its rounding).
          EXPECT_NEAR(row_total, b, bf16 ? 0.01 * b : 1e-4 * b) << describe(variant);
        }
        // f32: the kernels' f32 dot products vs the fp64 one here; bf16: a score that lands on
        // the other side of a bf16 rounding boundary moves one probability by a bf16 step.
        EXPECT_LE(worst, bf16 ? 2e-2 : 1e-5) << describe(variant) << " b " << b << " layer " << l;
        EXPECT_LE(total_error / static_cast<double>(heads * sz(b)), bf16 ? 1e-3 : 1e-6)
            << describe(variant) << " b " << b << " layer " << l;
      }
    }
  }
}

TEST(PrefillCaptureTest, QueryMomentsEqualBruteForceSums) {
  for (const Variant& variant : kVariants) {
    const model::ModelWeights weights = load_tiny_model("llama", variant.dtype);
    CpuModel model(weights, variant.backend);
    const auto& c = model.config();
    const std::vector<std::int32_t> tokens = random_tokens(40, c.vocab_size, 3);
    SequenceState state = model.new_sequence();
    RecordingObserver recorded;
    model.prefill(state, tokens, LogitRows::none, &recorded);
    SequenceState captured_state = model.new_sequence();
    cpu::CpuPrefillCapture capture(c, everything({3, 25, 40}, 0));
    model.prefill(captured_state, tokens, LogitRows::none, &capture);
    const std::size_t d = sz(c.head_dim), heads = sz(c.num_heads);
    for (int b : {3, 25, 40}) {
      for (const methods::LayerCapture& layer :
           capture.layers(b, captured_state, weights, model.rope_inv_freq())) {
        const std::size_t l = sz(layer.layer);
        EXPECT_EQ(layer.moments_first_row, 4);
        EXPECT_EQ(layer.query_count, std::max(0, b - 4));
        EXPECT_EQ(layer.window_rows, 0);
        ASSERT_EQ(layer.query_sum.size(), heads * d);
        ASSERT_EQ(layer.query_outer.size(), heads * d * d);
        for (std::size_t h = 0; h < heads; ++h) {
          std::vector<double> sum(d, 0.0), outer(d * d, 0.0);
          for (std::size_t i = 4; i < sz(b); ++i) {
            const float* q = &recorded.pre_rope[l][(i * heads + h) * d];
            for (std::size_t e = 0; e < d; ++e) {
              sum[e] += q[e];
              for (std::size_t f = 0; f < d; ++f)
                outer[e * d + f] += static_cast<double>(q[e]) * static_cast<double>(q[f]);
            }
          }
          // Same fp64 sums in the same row order: bitwise equal.
          EXPECT_EQ(to_vector(layer.query_sum.subspan(h * d, d)), sum) << describe(variant);
          EXPECT_EQ(to_vector(layer.query_outer.subspan(h * d * d, d * d)), outer)
              << describe(variant);
        }
      }
    }
  }
}

TEST(PrefillCaptureTest, BoundaryDataOfTheLongPrefillEqualsAPrefillOfOnlyThatPrefix) {
  for (const Variant& variant : kVariants) {
    const model::ModelWeights weights = load_tiny_model("llama", variant.dtype);
    CpuModel model(weights, variant.backend);
    const auto& c = model.config();
    const std::vector<std::int32_t> tokens = random_tokens(90, c.vocab_size, 4);
    const int lc = 66;
    SequenceState long_state = model.new_sequence();
    cpu::CpuPrefillCapture long_capture(c, everything({lc, 90}, 16));
    model.prefill(long_state, tokens, LogitRows::none, &long_capture);
    SequenceState short_state = model.new_sequence();
    cpu::CpuPrefillCapture short_capture(c, everything({lc}, 16));
    model.prefill(short_state, std::span(tokens).first(sz(lc)), LogitRows::none, &short_capture);
    const auto a = long_capture.layers(lc, long_state, weights, model.rope_inv_freq());
    const auto b = short_capture.layers(lc, short_state, weights, model.rope_inv_freq());
    for (std::size_t l = 0; l < a.size(); ++l) {
      const std::string where = describe(variant) + " layer " + std::to_string(l);
      EXPECT_EQ(to_vector(a[l].window_queries), to_vector(b[l].window_queries)) << where;
      EXPECT_EQ(to_vector(a[l].column_sums), to_vector(b[l].column_sums)) << where;
      EXPECT_EQ(to_vector(a[l].query_sum), to_vector(b[l].query_sum)) << where;
      EXPECT_EQ(to_vector(a[l].query_outer), to_vector(b[l].query_outer)) << where;
      EXPECT_EQ(a[l].query_count, b[l].query_count) << where;
      for (std::size_t g = 0; g < a[l].keys.size(); ++g) {
        EXPECT_EQ(to_vector(a[l].keys[g]), to_vector(b[l].keys[g])) << where;
        EXPECT_EQ(to_vector(a[l].values[g]), to_vector(b[l].values[g])) << where;
      }
    }
  }
}

TEST(PrefillCaptureTest, SkipsWhatIsNotRequestedAndClampsTheWindow) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const std::vector<std::int32_t> tokens = random_tokens(20, model.config().vocab_size, 5);
  SequenceState state = model.new_sequence();
  CaptureOptions options;
  options.boundaries = {5, 20, 5};
  options.window_rows = 8;
  cpu::CpuPrefillCapture capture(model.config(), options);
  EXPECT_FALSE(capture.wants_pre_rope_queries());
  model.prefill(state, tokens, LogitRows::none, &capture);
  const auto layers = capture.layers(5, state, weights, model.rope_inv_freq());
  EXPECT_EQ(layers[0].window_rows, 5);  // min(W, b)
  EXPECT_TRUE(layers[0].column_sums.empty());
  EXPECT_TRUE(layers[0].query_sum.empty());
  EXPECT_EQ(layers[0].query_count, 0);
  EXPECT_EQ(capture.layers(20, state, weights, model.rope_inv_freq())[1].window_rows, 8);
}

TEST(PrefillCaptureTest, RejectsBadConfigurationsPrefillsAndStates) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const auto& c = model.config();
  EXPECT_THROW(cpu::CpuPrefillCapture(c, CaptureOptions{}), std::invalid_argument);
  EXPECT_THROW(cpu::CpuPrefillCapture(c, everything({0, 5}, 1)), std::invalid_argument);
  EXPECT_THROW(cpu::CpuPrefillCapture(c, everything({5}, -1)), std::invalid_argument);

  const std::vector<std::int32_t> tokens = random_tokens(30, c.vocab_size, 6);
  {  // The prefill is shorter than a boundary.
    SequenceState state = model.new_sequence();
    cpu::CpuPrefillCapture capture(c, everything({31}, 2));
    EXPECT_THROW(model.prefill(state, tokens, LogitRows::none, &capture), std::invalid_argument);
    EXPECT_EQ(state.original_length(), 0);  // the failed prefill left nothing behind
    EXPECT_FALSE(capture.complete());
    EXPECT_THROW(capture.layers(31, state, weights, model.rope_inv_freq()), std::invalid_argument);
  }
  {  // A second prefill (not starting at position 0) or a second pass over the layers.
    SequenceState state = model.new_sequence();
    model.prefill(state, std::span(tokens).first(10), LogitRows::none);
    cpu::CpuPrefillCapture capture(c, everything({10}, 2));
    EXPECT_THROW(model.prefill(state, std::span(tokens).subspan(10), LogitRows::none, &capture),
                 std::invalid_argument);
  }
  SequenceState state = model.new_sequence();
  cpu::CpuPrefillCapture capture(c, everything({12, 30}, 2));
  model.prefill(state, tokens, LogitRows::none, &capture);
  SequenceState again = model.new_sequence();
  EXPECT_THROW(model.prefill(again, tokens, LogitRows::none, &capture), std::invalid_argument);
  EXPECT_THROW(capture.layers(13, state, weights, model.rope_inv_freq()), std::invalid_argument);
  EXPECT_THROW(capture.layers(12, state, weights, model.rope_inv_freq().first(3)),
               std::invalid_argument);
  // A state that no longer holds the prefix (evicted) cannot serve views.
  SequenceState evicted = state;
  const std::vector<std::int32_t> keep = {0, 1};
  evicted.kv_cache().retain(1, 0, keep);
  EXPECT_THROW(capture.layers(12, evicted, weights, model.rope_inv_freq()), std::invalid_argument);
  // Weights of another shape.
  const model::ModelWeights other = load_tiny_model("qwen2", "f32");
  if (other.config.num_layers != c.num_layers || other.config.hidden_size != c.hidden_size) {
    EXPECT_THROW(capture.layers(12, state, other, model.rope_inv_freq()), std::invalid_argument);
  }
}

}  // namespace
}  // namespace kvaudit::unit
