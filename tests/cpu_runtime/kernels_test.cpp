// Tests of the CPU backend's kernels (embedding, rms_norm, RoPE, linear, silu·mul, residual add):
// each against a naive double-precision reference written here, and the bf16 rounding points.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

#include "runners/cpu/elementwise.h"
#include "runners/cpu/embedding.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/rms_norm.h"
#include "runners/cpu/rope.h"
#include "runners/model/rope_tables.h"
#include "runners/model/bf16.h"
#include "tests/cpu_runtime/compare.h"
#include "tests/cpu_runtime/reference_forward.h"

namespace kvaudit::cpu {
namespace {

using model::round_to_bf16;
using testing::all_bf16_representable;
using testing::max_relative_error;

std::vector<float> random_values(std::size_t n, std::uint64_t seed, double stddev = 1.0,
                                 double mean = 0.0) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<float> out(n);
  for (float& v : out) v = static_cast<float>(dist(engine));
  return out;
}

TEST(EmbeddingTest, CopiesRowsAndRejectsOutOfRangeIds) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // [3, 2]
  const std::vector<std::int32_t> tokens = {2, 0, 2};
  std::vector<float> out(6);
  embed_tokens(table, 3, 2, tokens, out);
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
  const std::vector<std::int32_t> bad = {1, 3};
  std::vector<float> out2(4);
  try {
    embed_tokens(table, 3, 2, bad, out2);
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token id 3 at index 1"), std::string::npos) << e.what();
  }
  const std::vector<std::int32_t> negative = {-1};
  std::vector<float> out3(2);
  EXPECT_THROW(embed_tokens(table, 3, 2, negative, out3), std::invalid_argument);
}

TEST(RmsNormTest, F32MatchesDoubleReference) {
  const int hidden = 37;
  const std::vector<float> x = random_values(4 * hidden, 1, 3.0);
  const std::vector<float> w = random_values(hidden, 2, 0.1, 1.0);
  std::vector<float> out(x.size());
  rms_norm(x, w, hidden, 1e-5f, Rounding::none, out);
  std::vector<double> expected(x.size());
  for (int r = 0; r < 4; ++r) {
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += double(x[r * hidden + i]) * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(ss / hidden + 1e-5);
    for (int i = 0; i < hidden; ++i) expected[r * hidden + i] = x[r * hidden + i] * inv * w[i];
  }
  EXPECT_LE(max_relative_error(out, expected), 1e-6);
}

TEST(RmsNormTest, Bf16RoundsTheNormalizedValueThenTheProduct) {
  const int hidden = 64;
  std::vector<float> x = random_values(3 * hidden, 3, 2.0);
  std::vector<float> w = random_values(hidden, 4, 0.1, 1.0);
  for (float& v : x) v = round_to_bf16(v);
  for (float& v : w) v = round_to_bf16(v);
  std::vector<float> out(x.size());
  rms_norm(x, w, hidden, 1e-6f, Rounding::bf16, out);
  EXPECT_TRUE(all_bf16_representable(out));
  int double_rounding_cases = 0;
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += double(x[r * hidden + i]) * x[r * hidden + i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / hidden) + 1e-6f);
    for (int i = 0; i < hidden; ++i) {
      const float y = x[r * hidden + i] * inv;
      const float expected = round_to_bf16(w[i] * round_to_bf16(y));  // HF: weight * y.to(bf16)
      EXPECT_EQ(out[r * hidden + i], expected) << "row " << r << " index " << i;
      if (round_to_bf16(w[i] * y) != expected) ++double_rounding_cases;
    }
  }
  // The data exercise the first rounding: skipping it would change some outputs.
  EXPECT_GT(double_rounding_cases, 0);
}

TEST(RopeTest, DefaultInvFreqMatchesFormula) {
  model::RopeConfig rope;
  rope.theta = 1e6;
  const std::vector<float> inv = model::rope_inv_freq(rope, 128);
  ASSERT_EQ(inv.size(), 64u);
  for (std::size_t i = 0; i < inv.size(); ++i) {
    const double expected = 1.0 / std::pow(1e6, 2.0 * double(i) / 128.0);
    EXPECT_NEAR(inv[i], expected, 1e-6 * expected) << i;
  }
  EXPECT_EQ(inv[0], 1.0f);
}

TEST(RopeTest, Llama3InvFreqMatchesIndependentFormula) {
  // Llama-3.1's parameters (config.json rope_scaling) with head_dim 128.
  model::RopeConfig rope;
  rope.theta = 500000.0;
  rope.scaling = model::RopeScalingType::llama3;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 8192;
  const std::vector<float> inv = model::rope_inv_freq(rope, 128);
  int low = 0, high = 0, medium = 0;
  for (std::size_t i = 0; i < inv.size(); ++i) {
    // Written out here from the llama3 definition, independently of runners/cpu.
    const double base = 1.0 / std::pow(500000.0, 2.0 * double(i) / 128.0);
    const double wavelen = 2.0 * std::numbers::pi / base;
    double expected;
    if (wavelen < 8192.0 / 4.0) {
      expected = base;
      ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      expected = base / 8.0;
      ++low;
    } else {
      const double s = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1.0 - s) * base / 8.0 + s * base;
      ++medium;
    }
    EXPECT_NEAR(inv[i], expected, 2e-6 * expected) << "i = " << i;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
  EXPECT_GT(medium, 0);
  // The test helper's double reference agrees too (it is the oracle of the model tests).
  const std::vector<double> ref = testing::reference_inv_freq(rope, 128);
  EXPECT_LE(max_relative_error(inv, ref), 2e-6);
}

TEST(RopeTest, RejectsOddHeadDim) {
  EXPECT_THROW(model::rope_inv_freq(model::RopeConfig{}, 7), std::invalid_argument);
}

TEST(RopeTest, HandWorkedRotateHalfExample) {
  // head_dim 4, θ = 10000: inv_freq = [1, 0.01]; pairs are (0, 2) and (1, 3) (rotate-half).
  const std::vector<float> inv = model::rope_inv_freq(model::RopeConfig{}, 4);
  ASSERT_FLOAT_EQ(inv[1], 0.01f);
  const std::vector<std::int32_t> positions = {3};
  std::vector<float> cos(4), sin(4);
  model::rope_cos_sin(inv, positions, Rounding::none, cos, sin);
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x, 1, 4, cos, sin, Rounding::none);
  const double a0 = 3.0, a1 = 3.0 * double(0.01f);
  EXPECT_NEAR(x[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(x[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}

TEST(RopeTest, F32MatchesDoubleRotationAtLargePositions) {
  const int heads = 3, head_dim = 64;
  model::RopeConfig rope;
  rope.theta = 500000.0;
  const std::vector<float> inv = model::rope_inv_freq(rope, head_dim);
  const std::vector<std::int32_t> positions = {0, 1, 17, 4095, 32767};
  std::vector<float> cos(positions.size() * head_dim), sin(cos.size());
  model::rope_cos_sin(inv, positions, Rounding::none, cos, sin);
  std::vector<float> x = random_values(positions.size() * heads * head_dim, 5);
  const std::vector<float> original = x;
  apply_rope(x, heads, head_dim, cos, sin, Rounding::none);
  std::vector<double> expected(x.size());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < heads; ++h) {
      const std::size_t base = (t * heads + h) * head_dim;
      for (int i = 0; i < head_dim / 2; ++i) {
        // HF's angle is the fp32 product position·inv_freq; everything after it in double.
        const double angle = double(static_cast<float>(positions[t]) * inv[i]);
        const double a = original[base + i], b = original[base + i + head_dim / 2];
        expected[base + i] = a * std::cos(angle) - b * std::sin(angle);
        expected[base + i + head_dim / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  EXPECT_LE(max_relative_error(x, expected), 1e-6);
}

TEST(RopeTest, Bf16RoundsCosSinEachProductAndTheSum) {
  const int head_dim = 32;
  const std::vector<float> inv = model::rope_inv_freq(model::RopeConfig{}, head_dim);
  const std::vector<std::int32_t> positions = {5, 900};
  std::vector<float> cos(2 * head_dim), sin(2 * head_dim);
  model::rope_cos_sin(inv, positions, Rounding::bf16, cos, sin);
  EXPECT_TRUE(all_bf16_representable(cos));
  EXPECT_TRUE(all_bf16_representable(sin));
  std::vector<float> x = random_values(2 * head_dim, 6, 2.0);
  for (float& v : x) v = round_to_bf16(v);
  const std::vector<float> original = x;
  apply_rope(x, 1, head_dim, cos, sin, Rounding::bf16);
  EXPECT_TRUE(all_bf16_representable(x));
  const int half = head_dim / 2;
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < head_dim; ++i) {
      const float xi = original[t * head_dim + i];
      const float rotated =
          i < half ? -original[t * head_dim + i + half] : original[t * head_dim + i - half];
      const float expected = round_to_bf16(round_to_bf16(xi * cos[t * head_dim + i]) +
                                           round_to_bf16(rotated * sin[t * head_dim + i]));
      EXPECT_EQ(x[t * head_dim + i], expected) << t << "," << i;
    }
  }
}

TEST(LinearTest, F32MatchesDoubleReferenceWithBias) {
  const int rows = 5, in = 33, out = 17;
  const std::vector<float> x = random_values(rows * in, 7);
  const std::vector<float> w = random_values(out * in, 8, 0.2);
  const std::vector<float> b = random_values(out, 9);
  std::vector<float> y(rows * out);
  linear(x, rows, in, w, out, b, Rounding::none, y);
  std::vector<double> expected(y.size());
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i) s += double(x[r * in + i]) * w[o * in + i];
      expected[r * out + o] = s;
    }
  EXPECT_LE(max_relative_error(y, expected), 1e-6);
  std::vector<float> no_bias(rows * out);
  linear(x, rows, in, w, out, {}, Rounding::none, no_bias);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o)
      EXPECT_NEAR(no_bias[r * out + o], expected[r * out + o] - b[o], 1e-5);
}

TEST(LinearTest, Bf16RoundsOnceAfterTheBias) {
  const int rows = 4, in = 40, out = 24;
  std::vector<float> x = random_values(rows * in, 10);
  std::vector<float> w = random_values(out * in, 11, 0.2);
  std::vector<float> b = random_values(out, 12);
  for (auto* v : {&x, &w, &b})
    for (float& e : *v) e = round_to_bf16(e);
  std::vector<float> exact(rows * out), rounded(rows * out);
  linear(x, rows, in, w, out, b, Rounding::none, exact);
  linear(x, rows, in, w, out, b, Rounding::bf16, rounded);
  EXPECT_TRUE(all_bf16_representable(rounded));
  for (std::size_t i = 0; i < exact.size(); ++i) EXPECT_EQ(rounded[i], round_to_bf16(exact[i]));
  EXPECT_THROW(linear(x, rows, in, w, out + 1, {}, Rounding::none, rounded), std::invalid_argument);
}

TEST(LinearTest, ResultDoesNotDependOnTheThreadCount) {
  // Large enough to be split over threads (slices of 64 output features).
  const int rows = 9, in = 96, out = 1000;
  const std::vector<float> x = random_values(rows * in, 17);
  const std::vector<float> w = random_values(out * in, 18, 0.1);
  const std::vector<float> b = random_values(out, 19);
  const int saved = omp_get_max_threads();
  std::vector<float> reference(rows * out);
  omp_set_num_threads(1);
  linear(x, rows, in, w, out, b, Rounding::bf16, reference);
  for (int threads : {2, 3, 5}) {
    omp_set_num_threads(threads);
    std::vector<float> y(rows * out);
    linear(x, rows, in, w, out, b, Rounding::bf16, y);
    EXPECT_EQ(y, reference) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(LinearTest, LmHeadIsTheProductWithTheOutputProjection) {
  const int rows = 2, hidden = 16, vocab = 11;
  const std::vector<float> h = random_values(rows * hidden, 13);
  const std::vector<float> e = random_values(vocab * hidden, 14);
  std::vector<float> logits(rows * vocab);
  lm_head(h, rows, hidden, e, vocab, Rounding::bf16, logits);
  EXPECT_TRUE(all_bf16_representable(logits));
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < vocab; ++v) {
      double s = 0;
      for (int i = 0; i < hidden; ++i) s += double(h[r * hidden + i]) * e[v * hidden + i];
      EXPECT_NEAR(logits[r * vocab + v], s, std::abs(s) * 0.004 + 1e-5);
    }
}

TEST(ElementwiseTest, SiluMulMatchesDoubleAndRoundsTwiceInBf16) {
  std::vector<float> gate = random_values(300, 15, 3.0);
  std::vector<float> up = random_values(300, 16);
  std::vector<float> out(300);
  silu_mul(gate, up, Rounding::none, out);
  std::vector<double> expected(300);
  for (int i = 0; i < 300; ++i) expected[i] = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
  EXPECT_LE(max_relative_error(out, expected), 1e-6);
  for (float& v : gate) v = round_to_bf16(v);
  for (float& v : up) v = round_to_bf16(v);
  silu_mul(gate, up, Rounding::bf16, out);
  for (int i = 0; i < 300; ++i) {
    const float act = round_to_bf16(gate[i] / (1.0f + std::exp(-gate[i])));
    EXPECT_EQ(out[i], round_to_bf16(act * up[i])) << i;
  }
}

TEST(ElementwiseTest, ResidualAddRoundsInBf16) {
  std::vector<float> residual = {1.0f, 256.0f, -3.5f};
  const std::vector<float> delta = {1e-3f, 1.0f, 0.25f};
  std::vector<float> exact = residual;
  residual_add(exact, delta, Rounding::none);
  EXPECT_EQ(exact, (std::vector<float>{1.001f, 257.0f, -3.25f}));
  residual_add(residual, delta, Rounding::bf16);
  // 1 + 1e-3 rounds back to 1 in bf16; 257 is not representable (bf16 step at 256 is 2).
  EXPECT_EQ(residual, (std::vector<float>{1.0f, 256.0f, -3.25f}));
}

}  // namespace
}  // namespace kvaudit::cpu
