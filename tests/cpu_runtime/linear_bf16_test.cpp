// linear_bf16 (the bf16 GEMM of bf16 models, runners/cpu/linear_bf16.h) against linear() (the f32
// order on the same bf16 values held in f32) and a double reference: at most 1 bf16 ulp
// apart after the bf16 rounding except where a dot product cancels; unrounded fp32 sums within
// γ_K·Σ|xw| of the exact dot product and bit-equal to a scalar spelling of VDPBF16PS's order; a
// row's bits independent of the rows computed with it (which also crosses from the VDPBF16PS kernel
// to its fp32-FMA twin, tiny values included) and of the thread count; the refusal of weights that
// are not bf16 values; CpuModel's bf16 forward through it. They run at the active level
// (KVAUDIT_CPU_ISA); canonical_order_test.cpp compares the levels with each other.
#include "runners/cpu/linear_bf16.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/cpu/linear.h"
#include "runners/model/bf16.h"
#include "tests/cpu_runtime/compare.h"
#include "tests/cpu_runtime/random_model.h"

namespace kvaudit::cpu {
namespace {

using model::round_to_bf16;

const int kRows[] = {1, 2, 5, 16, 33, 512};
const int kIn[] = {64, 576, 577, 1536};
const int kOut[] = {16, 64, 576, 1000};

// bf16 values ~ N(0, scale²), held in f32.
std::vector<float> bf16_values(std::size_t n, std::uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = round_to_bf16(static_cast<float>(normal(rng)));
  return v;
}

// Distance of two bf16 values (held in f32) in bf16 ulps (±0 are one value).
int bf16_ulps(float a, float b) {
  const auto ordered = [](float v) {
    const int bits = model::f32_to_bf16_bits(v);
    return (bits & 0x8000) != 0 ? -(bits & 0x7fff) : bits;
  };
  return std::abs(ordered(a) - ordered(b));
}

struct Problem {
  int rows, in, out;
  std::vector<float> x, w, bias;
};

Problem make_problem(int rows, int in, int out, bool with_bias, std::uint64_t seed) {
  Problem p{rows, in, out, {}, {}, {}};
  p.x = bf16_values(static_cast<std::size_t>(rows) * in, seed, 1.0);
  p.w = bf16_values(static_cast<std::size_t>(out) * in, seed + 1, 1.0 / std::sqrt(in));
  if (with_bias) p.bias = bf16_values(static_cast<std::size_t>(out), seed + 2, 0.5);
  return p;
}

std::vector<float> run_bf16(const Problem& p, const PackedBf16Weight& packed, Rounding rounding,
                            int rows = -1) {
  if (rows < 0) rows = p.rows;
  std::vector<float> y(static_cast<std::size_t>(rows) * p.out);
  linear_bf16(std::span<const float>(p.x.data(), static_cast<std::size_t>(rows) * p.in), rows, p.in,
              packed, p.bias, rounding, y);
  return y;
}

std::vector<float> run_f32(const Problem& p, Rounding rounding) {
  std::vector<float> y(static_cast<std::size_t>(p.rows) * p.out);
  linear(p.x, p.rows, p.in, p.w, p.out, p.bias, rounding, y);
  return y;
}

bool bit_equal(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// A bf16 ulp apart at most, except where the dot product (with its bias) cancels: both paths' fp32
// results lie within γ_{K+1}·(Σ|xw| + |b|) of the exact value, which bounds their difference by
// twice that; that is under a
// bf16 ulp of the result while κ = Σ|xw| / |Σxw| stays below about 2¹⁵/K, and beyond it (a result
// that nearly cancels) a few fp32 ulps of Σ|xw| can be many bf16 ulps of the small result.
TEST(LinearBf16, MatchesTheF32TwinWithinOneBf16UlpAfterRounding) {
  constexpr double u = 0x1p-24;
  long long elements = 0, differing = 0, beyond_one = 0;
  int max_ulps = 0, max_ulps_conditioned = 0;
  double min_kappa_beyond_one = INFINITY;
  int shape = 0;
  for (int rows : kRows) {
    for (int in : kIn) {
      for (int out : kOut) {
        ++shape;
        const Problem p = make_problem(rows, in, out, shape % 2 == 0, 100 + shape);
        const PackedBf16Weight packed(p.w, out, in, "w");
        const std::vector<float> kernel = run_bf16(p, packed, Rounding::bf16);
        const std::vector<float> kernel_f32 = run_bf16(p, packed, Rounding::none);
        const std::vector<float> twin_f32 = run_f32(p, Rounding::none);
        const double gamma = (in + 1) * u / (1.0 - (in + 1) * u);
        for (int r = 0; r < rows; ++r) {
          for (int o = 0; o < out; ++o) {
            const std::size_t i = static_cast<std::size_t>(r) * out + o;
            ASSERT_TRUE(bit_equal(kernel[i], round_to_bf16(kernel_f32[i])));
            const int d = bf16_ulps(kernel[i], round_to_bf16(twin_f32[i]));
            max_ulps = std::max(max_ulps, d);
            differing += d != 0 ? 1 : 0;
            if (d <= 1) continue;
            ++beyond_one;
            double exact = 0.0, magnitude = 0.0;
            for (int k = 0; k < in; ++k) {
              const double t = static_cast<double>(p.x[static_cast<std::size_t>(r) * in + k]) *
                               p.w[static_cast<std::size_t>(o) * in + k];
              exact += t;
              magnitude += std::abs(t);
            }
            if (!p.bias.empty()) {  // the bias is one more term (added in fp32 afterwards)
              exact += p.bias[static_cast<std::size_t>(o)];
              magnitude += std::abs(p.bias[static_cast<std::size_t>(o)]);
            }
            const double kappa = magnitude / std::abs(exact);
            min_kappa_beyond_one = std::min(min_kappa_beyond_one, kappa);
            if (kappa * in < 0x1p15) max_ulps_conditioned = std::max(max_ulps_conditioned, d);
            EXPECT_LE(std::abs(static_cast<double>(kernel_f32[i]) - twin_f32[i]),
                      2 * gamma * magnitude)
                << rows << " x " << in << " -> " << out << " at [" << r << "][" << o << "]";
          }
        }
        elements += static_cast<long long>(kernel.size());
        EXPECT_TRUE(testing::all_bf16_representable(kernel));
      }
    }
  }
  EXPECT_EQ(max_ulps_conditioned, 0) << "more than 1 bf16 ulp apart where κ·K < 2¹⁵";
  std::cout << "[ linear_bf16 vs linear() after bf16 rounding ] " << differing << " of " << elements
            << " outputs differ; " << beyond_one << " by more than 1 bf16 ulp (max " << max_ulps
            << "), all cancellations: κ = (Σ|xw| + |b|) / |Σxw + b| >= " << min_kappa_beyond_one
            << "\n";
  RecordProperty("max_bf16_ulps", max_ulps);
  RecordProperty("differing_outputs", std::to_string(differing) + "/" + std::to_string(elements));
}

// Whether this CPU's VDPBF16PS sums a lane's pair as the SDM's pseudocode does (odd element first,
// then even, each an fp32 FMA): 1 + t3 + t2 with t3 = u/2, t2 = 3u/4 (u = 2⁻²³) gives 1 + u in that
// order and 1 + 2u in the other.
bool instruction_follows_the_sdm_order() {
  const float x[4] = {0.0f, 1.0f, 1.0f, 1.0f};
  const float w[4] = {0.0f, 1.0f, std::ldexp(3.0f, -25), std::ldexp(1.0f, -24)};
  const PackedBf16Weight packed(w, 1, 4, "probe");
  float y = 0.0f;
  linear_bf16(x, 1, 4, packed, {}, Rounding::none, std::span<float>(&y, 1));
  return y == 1.0f + std::ldexp(1.0f, -23);
}

TEST(LinearBf16, UnroundedSumsAreTheFixedOrderFp32SumsOfTheExactProducts) {
  const bool sdm_order = instruction_follows_the_sdm_order();
  if (!sdm_order) {
    std::cout << "[ note ] this CPU's VDPBF16PS sums a pair in another order than the SDM's "
                 "pseudocode: only the error bound is checked\n";
  }
  constexpr double u = 0x1p-24;
  double worst_ratio = 0.0;  // |error| / bound
  long long checked = 0, spelled_out = 0;
  int shape = 0;
  for (int rows : {1, 5, 33, 512}) {
    for (int in : kIn) {
      for (int out : kOut) {
        const Problem p = make_problem(rows, in, out, false, 300 + ++shape);
        const PackedBf16Weight packed(p.w, out, in, "w");
        const std::vector<float> y = run_bf16(p, packed, Rounding::none);
        const double gamma = in * u / (1.0 - in * u);
        const int row_step = rows == 512 ? 37 : 1;  // 512 rows: a sample, for time
        for (int r = 0; r < rows; r += row_step) {
          const float* xr = p.x.data() + static_cast<std::size_t>(r) * in;
          for (int o = 0; o < out; ++o) {
            const float* wo = p.w.data() + static_cast<std::size_t>(o) * in;
            double exact = 0.0, magnitude = 0.0;
            for (int i = 0; i < in; ++i) {
              const double t = static_cast<double>(xr[i]) * static_cast<double>(wo[i]);
              exact += t;  // bf16 × bf16 products are exact in double, sums near-exact
              magnitude += std::abs(t);
            }
            const float got = y[static_cast<std::size_t>(r) * out + o];
            const double bound = gamma * magnitude;
            const double error = std::abs(static_cast<double>(got) - exact);
            ASSERT_LE(error, bound)
                << rows << " x " << in << " -> " << out << " at [" << r << "][" << o << "]";
            if (bound > 0) worst_ratio = std::max(worst_ratio, error / bound);
            ++checked;
            if (sdm_order && rows <= 33) {
              // VDPBF16PS's order: per pair p, x[2p+1]·w[2p+1] then x[2p]·w[2p] (the padded zero
              // pair of an odd K included), each an fp32 FMA.
              float acc = 0.0f;
              for (int i = 0; i < in; i += 2) {
                const float x1 = i + 1 < in ? xr[i + 1] : 0.0f;
                const float w1 = i + 1 < in ? wo[i + 1] : 0.0f;
                acc = std::fma(x1, w1, acc);
                acc = std::fma(xr[i], wo[i], acc);
              }
              ASSERT_TRUE(bit_equal(got, acc)) << rows << " x " << in << " -> " << out << " at ["
                                               << r << "][" << o << "]: " << got << " vs " << acc;
              ++spelled_out;
            }
          }
        }
      }
    }
  }
  std::cout << "[ linear_bf16 unrounded ] " << checked
            << " outputs within γ_K·Σ|xw| of the exact sum (worst |error|/bound " << worst_ratio
            << "); " << spelled_out << " bit-equal to the SDM-order scalar spelling\n";
}

// Fewer than 12 rows run the bf16 tiles (weights widened in registers; at the avx512bf16 level the
// VDPBF16PS kernel), more the f32 tiles on a widened panel (linear_bf16.cpp): the row counts
// below cross that boundary, so this also checks that the paths give the same bits.
TEST(LinearBf16, ARowsBitsDoNotDependOnTheRowsComputedWithIt) {
  EXPECT_FALSE(linear_bf16_runs_dpbf16(512));
  if (!linear_bf16_runs_dpbf16(1)) {
    std::cout
        << "[ note ] no VDPBF16PS at this level (or this CPU's sums in another order than the "
           "SDM's pseudocode): every row count runs the fp32-FMA tiles\n";
  }
  const int shapes[][2] = {{64, 64}, {576, 576}, {577, 1000}, {1536, 576}, {576, 1536}};
  int seed = 0;
  for (const auto& shape : shapes) {
    const int in = shape[0], out = shape[1];
    for (Rounding rounding : {Rounding::none, Rounding::bf16}) {
      const Problem p = make_problem(512, in, out, true, 500 + ++seed);
      const PackedBf16Weight packed(p.w, out, in, "w");
      const std::vector<float> all = run_bf16(p, packed, rounding);
      int differing = 0;
      for (int rows : {1, 2, 5, 6, 7, 16, 33}) {
        const std::vector<float> some = run_bf16(p, packed, rounding, rows);
        for (std::size_t i = 0; i < some.size(); ++i)
          differing += bit_equal(some[i], all[i]) ? 0 : 1;
      }
      // Each of 33 rows alone == the same row among 33.
      const std::vector<float> among = run_bf16(p, packed, rounding, 33);
      for (int r = 0; r < 33; ++r) {
        Problem alone{1, in, out, {}, p.w, p.bias};
        alone.x.assign(p.x.begin() + static_cast<std::ptrdiff_t>(r) * in,
                       p.x.begin() + static_cast<std::ptrdiff_t>(r + 1) * in);
        const std::vector<float> y = run_bf16(alone, packed, rounding);
        for (int o = 0; o < out; ++o)
          differing += bit_equal(y[o], among[static_cast<std::size_t>(r) * out + o]) ? 0 : 1;
      }
      EXPECT_EQ(differing, 0) << in << " -> " << out;
    }
  }
}

// Products and sums that fall below fp32's normal range: VDPBF16PS reads denormal inputs as zero
// and flushes denormal results; the fma twin runs under DAZ and FTZ to match it.
TEST(LinearBf16, TinyValuesGiveTheSameBitsInBothKernels) {
  for (int in : {64, 577}) {
    const int out = 100;
    Problem p = make_problem(33, in, out, false, 900 + in);
    for (float& w : p.w) w = round_to_bf16(std::ldexp(w, -120));  // products near 2⁻¹²⁶
    for (std::size_t i = 0; i < p.x.size(); i += 7) p.x[i] = std::ldexp(1.0f, -130);  // denormal
    const PackedBf16Weight packed(p.w, out, in, "tiny");
    const std::vector<float> among = run_bf16(p, packed, Rounding::none);
    int differing = 0, flushed = 0;
    for (int r = 0; r < 33; ++r) {
      Problem alone{1, in, out, {}, p.w, {}};
      alone.x.assign(p.x.begin() + static_cast<std::ptrdiff_t>(r) * in,
                     p.x.begin() + static_cast<std::ptrdiff_t>(r + 1) * in);
      const std::vector<float> y = run_bf16(alone, packed, Rounding::none);
      for (int o = 0; o < out; ++o) {
        const float v = among[static_cast<std::size_t>(r) * out + o];
        differing += bit_equal(y[o], v) ? 0 : 1;
        flushed += v == 0.0f ? 1 : 0;
        EXPECT_FALSE(std::fpclassify(v) == FP_SUBNORMAL) << "a denormal result was not flushed";
      }
    }
    EXPECT_EQ(differing, 0) << in;
    std::cout << "[ tiny values, K = " << in << " ] " << flushed << " of " << 33 * out
              << " outputs flushed to zero, identical in both kernels\n";
  }
}

TEST(LinearBf16, ResultsDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  int seed = 0;
  for (int rows : {1, 16, 512}) {
    for (const auto& shape : {std::pair{576, 1000}, std::pair{1536, 576}, std::pair{577, 576}}) {
      const Problem p = make_problem(rows, shape.first, shape.second, true, 700 + ++seed);
      const PackedBf16Weight packed(p.w, p.out, p.in, "w");
      omp_set_num_threads(1);
      const std::vector<float> one = run_bf16(p, packed, Rounding::none);
      omp_set_num_threads(2);
      const std::vector<float> two = run_bf16(p, packed, Rounding::none);
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
          << rows << " x " << p.in << " -> " << p.out;
    }
  }
  omp_set_num_threads(saved);
}

TEST(LinearBf16, RefusesWeightsThatAreNotBf16Values) {
  std::vector<float> w = bf16_values(20 * 7, 9, 0.3);
  EXPECT_NO_THROW(PackedBf16Weight(w, 20, 7, "ok"));
  w[3 * 7 + 5] = 1.0f + std::ldexp(1.0f, -12);
  try {
    PackedBf16Weight(w, 20, 7, "model.safetensors: layer 0 q_proj");
    ADD_FAILURE() << "a weight that is not a bf16 value was packed";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("layer 0 q_proj"), std::string::npos) << message;
    EXPECT_NE(message.find("[3][5]"), std::string::npos) << message;
  }
  EXPECT_THROW(PackedBf16Weight(std::vector<float>(10), 3, 4, "short"), std::invalid_argument);
}

TEST(LinearBf16, NoInputFeaturesGiveTheBias) {
  const PackedBf16Weight packed(std::vector<float>{}, 20, 0, "empty");
  const std::vector<float> bias = bf16_values(20, 4, 1.0);
  for (int rows : {1, 16}) {
    std::vector<float> y(static_cast<std::size_t>(rows) * 20, -1.0f);
    linear_bf16({}, rows, 0, packed, bias, Rounding::bf16, y);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < 20; ++o) EXPECT_EQ(y[static_cast<std::size_t>(r) * 20 + o], bias[o]);
    }
  }
}

TEST(LinearBf16, CpuModelUsesTheKernelForBf16ModelsOnly) {
  testing::RandomModelSpec spec;
  spec.hidden_size = 128;
  spec.intermediate_size = 512;
  spec.vocab_size = 700;
  spec.attention_bias = true;
  spec.dtype = model::ComputeDtype::bf16;
  const model::ModelWeights weights = testing::make_random_model(spec);
  const std::vector<std::int32_t> tokens = testing::random_tokens(60, spec.vocab_size, 3);
  CpuModel kernel(weights, AttentionBackend::sdpa);
  EXPECT_TRUE(kernel.uses_bf16_kernel());
  spec.dtype = model::ComputeDtype::f32;
  const model::ModelWeights f32_weights = testing::make_random_model(spec);
  EXPECT_FALSE(CpuModel(f32_weights, AttentionBackend::sdpa).uses_bf16_kernel());

  SequenceState a = kernel.new_sequence();
  const LogitMatrix with = kernel.prefill(a, tokens, LogitRows::all);
  EXPECT_TRUE(testing::all_bf16_representable(with.values));
}

}  // namespace
}  // namespace kvaudit::cpu
