// The canonical evaluation order (docs/design/numerics.md §Canonical evaluation order): every
// instruction-set level this machine has (scalar, avx2, avx512, avx512bf16; cpu_isa.h) gives the
// same bits for linear() (raw and packed weights), linear_bf16(), gemm() in all four
// orientations, the attention inner loops and a whole CpuModel forward (f32 and bf16, eager and
// sdpa, prefill and decode); and linear() equals the order spelled out with std::fma. Levels the
// CPU lacks are named on stdout (they cannot run here).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "base/attention_backend.h"
#include "runners/cpu/attention_math.h"
#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/linear_bf16.h"
#include "runners/model/bf16.h"
#include "tests/cpu_runtime/random_model.h"

namespace kvaudit::cpu {
namespace {

std::vector<CpuIsa> levels_here() {
  std::vector<CpuIsa> levels;
  for (const CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512bf16}) {
    if (static_cast<int>(isa) <= static_cast<int>(detected_cpu_isa())) {
      levels.push_back(isa);
    } else {
      std::cout << "[ level " << cpu_isa_name(isa) << " ] not on this CPU: not checked here\n";
    }
  }
  return levels;
}

std::vector<float> random_values(std::size_t n, std::uint64_t seed, bool bf16 = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = bf16 ? model::round_to_bf16(normal(rng)) : normal(rng);
  return v;
}

// Positions where a and b differ in any bit.
int differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    n += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]) ? 1 : 0;
  }
  return n;
}

// Runs `compute` at every level and thread count (1, 2) and expects the bits of the first run.
template <class Compute>
void expect_same_bits_everywhere(const std::string& what, Compute&& compute) {
  std::vector<float> reference;
  std::string reference_name;
  for (const CpuIsa isa : levels_here()) {
    const ScopedCpuIsa level(isa);
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const std::vector<float> result = compute();
      const std::string name =
          std::string(cpu_isa_name(isa)) + ", " + std::to_string(threads) + " thread(s)";
      if (reference_name.empty()) {
        reference = result;
        reference_name = name;
        continue;
      }
      EXPECT_EQ(differing_bits(result, reference), 0)
          << what << ": " << name << " differs from " << reference_name;
    }
  }
  omp_set_num_threads(2);
}

const int kShapes[][3] = {  // rows, in, out
    {1, 64, 64}, {1, 576, 1536}, {3, 577, 100},   {6, 1536, 576},
    {7, 33, 17}, {13, 576, 576}, {33, 300, 1000}, {200, 576, 192}};

TEST(CanonicalOrder, LinearEqualsTheFmaChainSpelledOut) {
  for (const auto& shape : kShapes) {
    const int rows = shape[0], in = shape[1], out = shape[2];
    const std::vector<float> x = random_values(static_cast<std::size_t>(rows) * in, 1);
    const std::vector<float> w = random_values(static_cast<std::size_t>(out) * in, 2);
    const std::vector<float> bias = random_values(static_cast<std::size_t>(out), 3);
    std::vector<float> spelled(static_cast<std::size_t>(rows) * out);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        float acc = 0.0f;
        for (int k = 0; k < in; ++k) {
          acc = std::fma(x[static_cast<std::size_t>(r) * in + k],
                         w[static_cast<std::size_t>(o) * in + k], acc);
        }
        spelled[static_cast<std::size_t>(r) * out + o] = acc + bias[static_cast<std::size_t>(o)];
      }
    }
    for (const CpuIsa isa : levels_here()) {
      const ScopedCpuIsa level(isa);
      std::vector<float> y(spelled.size());
      linear(x, rows, in, w, out, bias, Rounding::none, y);
      EXPECT_EQ(differing_bits(y, spelled), 0)
          << cpu_isa_name(isa) << " rows " << rows << " in " << in << " out " << out;
    }
  }
}

TEST(CanonicalOrder, LinearAndLinearBf16AreTheSameAtEveryLevelAndThreadCount) {
  for (const auto& shape : kShapes) {
    const int rows = shape[0], in = shape[1], out = shape[2];
    const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) +
                             " out " + std::to_string(out);
    const std::vector<float> x = random_values(static_cast<std::size_t>(rows) * in, 4, true);
    const std::vector<float> w = random_values(static_cast<std::size_t>(out) * in, 5, true);
    const std::vector<float> bias = random_values(static_cast<std::size_t>(out), 6, true);
    const PackedF32Weight packed_f32(w, out, in, "w");
    const PackedBf16Weight packed_bf16(w, out, in, "w");
    const auto run = [&](int kind, Rounding rounding) {
      return [&, kind, rounding] {
        std::vector<float> y(static_cast<std::size_t>(rows) * out);
        if (kind == 0) linear(x, rows, in, w, out, bias, rounding, y);
        if (kind == 1) linear(x, rows, in, packed_f32, bias, rounding, y);
        if (kind == 2) linear_bf16(x, rows, in, packed_bf16, bias, rounding, y);
        return y;
      };
    };
    for (const Rounding rounding : {Rounding::none, Rounding::bf16}) {
      expect_same_bits_everywhere("linear " + what, run(0, rounding));
      expect_same_bits_everywhere("linear packed " + what, run(1, rounding));
      expect_same_bits_everywhere("linear_bf16 " + what, run(2, rounding));
      EXPECT_EQ(differing_bits(run(0, rounding)(), run(1, rounding)()), 0) << what;
    }
  }
}

TEST(CanonicalOrder, GemmInEveryOrientationIsTheSameEverywhereAndEqualsLinear) {
  const int m = 37, n = 70, k = 129;
  const std::vector<float> a = random_values(static_cast<std::size_t>(m) * k, 7);
  const std::vector<float> b = random_values(static_cast<std::size_t>(k) * n, 8);
  std::vector<float> a_t(a.size()), b_t(b.size());
  for (int i = 0; i < m; ++i) {
    for (int l = 0; l < k; ++l)
      a_t[static_cast<std::size_t>(l) * m + i] = a[static_cast<std::size_t>(i) * k + l];
  }
  for (int l = 0; l < k; ++l) {
    for (int j = 0; j < n; ++j)
      b_t[static_cast<std::size_t>(j) * k + l] = b[static_cast<std::size_t>(l) * n + j];
  }
  const std::vector<float> start = random_values(static_cast<std::size_t>(m) * n, 9);
  std::vector<float> first;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      const auto run = [&] {
        std::vector<float> c = start;
        gemm(trans_a, trans_b, m, n, k, 0.5f, trans_a ? a_t.data() : a.data(), trans_a ? m : k,
             trans_b ? b_t.data() : b.data(), trans_b ? k : n, true, c.data(), n);
        return c;
      };
      expect_same_bits_everywhere("gemm", run);
      const std::vector<float> c = run();
      if (first.empty()) first = c;
      EXPECT_EQ(differing_bits(c, first), 0) << "trans_a " << trans_a << " trans_b " << trans_b;
    }
  }
  // op(B) = Bᵀ with B [n, k] is linear()'s weight: the chains are linear()'s.
  std::vector<float> y(static_cast<std::size_t>(m) * n);
  linear(a, m, k, b_t, n, {}, Rounding::none, y);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = start[i] + 0.5f * y[i];
  EXPECT_EQ(differing_bits(y, first), 0);
}

TEST(CanonicalOrder, AttentionInnerLoopsAreTheSameAtEveryLevel) {
  const std::size_t dim = 64, keys = 100, rows = 4;
  const std::size_t padded = padded_key_count(keys);
  const std::vector<float> queries = random_values(rows * dim, 10);
  // key panels (key_panels.h): [panel][dim][kKeyPanel]
  const std::vector<float> panels = random_values(padded * dim, 11);
  const std::vector<float> values = random_values(keys * dim, 12);
  for (const std::size_t r : {std::size_t{1}, std::size_t{3}, rows}) {
    expect_same_bits_everywhere("score_tile", [&] {
      std::vector<float> scores(rows * padded);
      score_tile(queries.data(), dim, r, panels.data(), 0, keys, dim, scores.data(), padded);
      return scores;
    });
    expect_same_bits_everywhere("accumulate_tile", [&] {
      std::vector<float> acc = random_values(rows * dim, 13);
      const std::vector<float> weights = random_values(rows * keys, 14);
      accumulate_tile(weights.data(), keys, r, values.data(), 3, keys, dim, acc.data(), dim);
      return acc;
    });
  }
  for (const bool bf16 : {false, true}) {
    for (const std::size_t count : {std::size_t{1}, std::size_t{17}, std::size_t{100}}) {
      expect_same_bits_everywhere("eager_probabilities", [&] {
        std::vector<float> s = random_values(count, 15);
        eager_probabilities(s.data(), count, 0.125f, bf16);
        return s;
      });
      expect_same_bits_everywhere("online_softmax_block", [&] {
        std::vector<float> s = random_values(count, 16);
        float running_max = 0.5f, running_sum = 3.0f;
        const float alpha =
            online_softmax_block(s.data(), count, 0.18f, bf16, running_max, running_sum);
        s.push_back(alpha);
        s.push_back(running_max);
        s.push_back(running_sum);
        return s;
      });
    }
  }
}

TEST(CanonicalOrder, AModelsLogitsAreTheSameAtEveryLevelAndThreadCount) {
  for (const model::ComputeDtype dtype : {model::ComputeDtype::f32, model::ComputeDtype::bf16}) {
    testing::RandomModelSpec spec;
    spec.hidden_size = 64;
    spec.intermediate_size = 160;
    spec.num_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_dim = 16;
    spec.vocab_size = 300;
    spec.attention_bias = true;
    spec.dtype = dtype;
    const model::ModelWeights weights = testing::make_random_model(spec);
    const std::vector<std::int32_t> tokens = testing::random_tokens(70, spec.vocab_size, 17);
    for (const AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
      CpuModel model(weights, backend);
      expect_same_bits_everywhere(
          std::string(dtype == model::ComputeDtype::bf16 ? "bf16 " : "f32 ") +
              std::string(attention_backend_name(backend)),
          [&] {
            SequenceState state = model.new_sequence();
            std::vector<float> all =
                model.prefill(state, std::span(tokens).first(60), LogitRows::all).values;
            for (std::size_t t = 60; t < tokens.size(); ++t) {
              const LogitMatrix step =
                  model.prefill(state, std::span(tokens).subspan(t, 1), LogitRows::last);
              all.insert(all.end(), step.values.begin(), step.values.end());
            }
            return all;
          });
    }
  }
}

}  // namespace
}  // namespace kvaudit::cpu
