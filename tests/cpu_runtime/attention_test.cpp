// Tests of the two attention backends on ragged per-head caches: each against a naive double
// softmax attention written here, eager vs sdpa agreement, chunk/block-size invariance, bf16
// outputs.
#include "runners/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "runners/cpu/key_panels.h"
#include "runners/cpu/kv_cache.h"
#include "runners/model/bf16.h"
#include "tests/cpu_runtime/compare.h"

namespace kvaudit::cpu {
namespace {

using testing::all_bf16_representable;
using testing::max_relative_error;

// A layer of a ragged cache: `past` earlier positions of which each KV head keeps a different
// random subset, then a chunk of `chunk` new tokens (kept by all heads) whose queries attend
// causally.
struct RaggedFixture {
  int num_heads = 6;
  int num_kv_heads = 2;
  int head_dim = 16;
  int past = 40;
  int chunk = 9;
  bool bf16 = false;
  std::vector<std::vector<std::int32_t>> positions;  // [kv][n]
  std::vector<std::vector<float>> keys, values;      // [kv][n * head_dim]
  std::vector<std::vector<float>> panels;            // [kv] keys in key_panels.h layout
  std::vector<float> queries;                        // [chunk, heads, head_dim]
  std::vector<std::int32_t> query_positions;         // [chunk]
  std::vector<KvHeadView> views;

  void build(std::uint64_t seed) {
    std::mt19937_64 engine(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::bernoulli_distribution keep(0.6);
    auto value = [&](float scale) {
      const float v = normal(engine) * scale;
      return bf16 ? model::round_to_bf16(v) : v;
    };
    positions.assign(num_kv_heads, {});
    keys.assign(num_kv_heads, {});
    values.assign(num_kv_heads, {});
    for (int h = 0; h < num_kv_heads; ++h) {
      for (int p = 0; p < past + chunk; ++p) {
        if (p < past && !keep(engine)) continue;
        positions[h].push_back(p);
        for (int d = 0; d < head_dim; ++d) keys[h].push_back(value(1.5f));
        for (int d = 0; d < head_dim; ++d) values[h].push_back(value(1.0f));
      }
    }
    queries.clear();
    for (int i = 0; i < chunk * num_heads * head_dim; ++i) queries.push_back(value(1.5f));
    query_positions.clear();
    for (int t = 0; t < chunk; ++t) query_positions.push_back(past + t);
    views.clear();
    panels.clear();
    for (int h = 0; h < num_kv_heads; ++h) {
      panels.push_back(keys_to_panels(keys[h].data(), positions[h].size(), head_dim));
    }
    for (int h = 0; h < num_kv_heads; ++h) {
      views.push_back({positions[h], keys[h], values[h], panels[h]});
    }
  }

  AttentionProblem problem() const {
    AttentionProblem p;
    p.num_heads = num_heads;
    p.num_kv_heads = num_kv_heads;
    p.head_dim = head_dim;
    p.scale = static_cast<float>(1.0 / std::sqrt(double(head_dim)));
    p.rounding = bf16 ? Rounding::bf16 : Rounding::none;
    p.queries = queries;
    p.query_positions = query_positions;
    p.kv_heads = views;
    return p;
  }

  // Naive dense attention in double: every kept entry with position ≤ the query's, softmax, P·V.
  std::vector<double> reference() const {
    std::vector<double> out(queries.size(), 0.0);
    const int group = num_heads / num_kv_heads;
    const double scale = 1.0 / std::sqrt(double(head_dim));
    for (int t = 0; t < chunk; ++t) {
      for (int h = 0; h < num_heads; ++h) {
        const int kv = h / group;
        std::vector<double> s;
        std::vector<std::size_t> idx;
        for (std::size_t j = 0; j < positions[kv].size(); ++j) {
          if (positions[kv][j] > query_positions[t]) continue;
          double dot = 0;
          for (int d = 0; d < head_dim; ++d)
            dot += double(queries[(t * num_heads + h) * head_dim + d]) * keys[kv][j * head_dim + d];
          s.push_back(dot * scale);
          idx.push_back(j);
        }
        const double m = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - m));
        for (std::size_t n = 0; n < idx.size(); ++n)
          for (int d = 0; d < head_dim; ++d)
            out[(t * num_heads + h) * head_dim + d] +=
                s[n] / sum * values[kv][idx[n] * head_dim + d];
      }
    }
    return out;
  }
};

TEST(AttentionTest, EagerMatchesDenseReferenceOnRaggedHeads) {
  RaggedFixture f;
  f.build(1);
  ASSERT_NE(f.positions[0], f.positions[1]) << "the fixture should make the heads ragged";
  std::vector<float> out(f.queries.size());
  attention_eager(f.problem(), 4, out);
  EXPECT_LE(max_relative_error(out, f.reference()), 1e-6);
}

TEST(AttentionTest, SdpaMatchesDenseReferenceOnRaggedHeads) {
  RaggedFixture f;
  f.build(2);
  std::vector<float> out(f.queries.size());
  attention_sdpa(f.problem(), 8, out);
  EXPECT_LE(max_relative_error(out, f.reference()), 1e-6);
}

TEST(AttentionTest, EagerAndSdpaAgreeInF32) {
  for (std::uint64_t seed : {3u, 4u, 5u}) {
    RaggedFixture f;
    f.past = 300;
    f.chunk = 17;
    f.build(seed);
    std::vector<float> eager(f.queries.size()), sdpa(f.queries.size());
    attention_eager(f.problem(), 5, eager);
    attention_sdpa(f.problem(), 32, sdpa);
    EXPECT_LE(max_relative_error(sdpa, eager), 1e-5) << "seed " << seed;
  }
}

TEST(AttentionTest, EagerResultDoesNotDependOnTheChunkSize) {
  for (bool bf16 : {false, true}) {
    RaggedFixture f;
    f.bf16 = bf16;
    f.chunk = 23;
    f.build(6);
    std::vector<float> whole(f.queries.size());
    attention_eager(f.problem(), 1000, whole);
    for (std::size_t chunk : {1u, 2u, 5u, 22u}) {
      std::vector<float> chunked(f.queries.size());
      attention_eager(f.problem(), chunk, chunked);
      EXPECT_EQ(chunked, whole) << "chunk " << chunk << (bf16 ? " bf16" : " f32");
    }
  }
}

TEST(AttentionTest, SdpaKeyBlockOnlyChangesRounding) {
  RaggedFixture f;
  f.past = 200;
  f.build(7);
  std::vector<float> one_block(f.queries.size());
  attention_sdpa(f.problem(), 100000, one_block);
  for (std::size_t block : {1u, 7u, 64u}) {
    std::vector<float> blocked(f.queries.size());
    attention_sdpa(f.problem(), block, blocked);
    // Rescaling by α once per block: f32 rounding grows with the number of blocks (blocks are
    // rounded up to whole key panels of 32).
    EXPECT_LE(max_relative_error(blocked, one_block), 1e-5) << "block " << block;
  }
}

TEST(AttentionTest, Bf16OutputsAreBf16AndCloseToTheDenseReference) {
  RaggedFixture f;
  f.bf16 = true;
  f.past = 100;
  f.build(8);
  const std::vector<double> reference = f.reference();
  std::vector<float> eager(f.queries.size()), sdpa(f.queries.size());
  attention_eager(f.problem(), 3, eager);
  attention_sdpa(f.problem(), 16, sdpa);
  EXPECT_TRUE(all_bf16_representable(eager));
  EXPECT_TRUE(all_bf16_representable(sdpa));
  EXPECT_LE(max_relative_error(eager, reference), 3e-2);
  EXPECT_LE(max_relative_error(sdpa, reference), 3e-2);
  // The two backends round differently (eager rounds scores and probabilities, sdpa does not).
  EXPECT_NE(eager, sdpa);
}

// The bf16 rounding points of each backend, written out naively for one block of keys (fp32
// arithmetic in the order the definitions in attention.h give). The dot products may be summed in
// another order by the vectorized kernel, so a few outputs may differ by one bf16 step; dropping
// any one rounding point changes far more of them.
std::vector<float> spelled_out_bf16(const RaggedFixture& f, bool eager) {
  using model::round_to_bf16;
  std::vector<float> out(f.queries.size());
  const int group = f.num_heads / f.num_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(double(f.head_dim)));
  const float c = scale * std::numbers::log2e_v<float>;
  for (int t = 0; t < f.chunk; ++t) {
    for (int h = 0; h < f.num_heads; ++h) {
      const int kv = h / group;
      std::vector<float> s;
      std::vector<std::size_t> idx;
      for (std::size_t j = 0; j < f.positions[kv].size(); ++j) {
        if (f.positions[kv][j] > f.query_positions[t]) continue;
        float dot = 0;
        for (int d = 0; d < f.head_dim; ++d)
          dot += f.queries[(t * f.num_heads + h) * f.head_dim + d] * f.keys[kv][j * f.head_dim + d];
        s.push_back(eager ? round_to_bf16(round_to_bf16(dot) * scale) : dot);
        idx.push_back(j);
      }
      const float m = *std::max_element(s.begin(), s.end());
      std::vector<float> p(s.size());
      float sum = 0;
      for (std::size_t n = 0; n < s.size(); ++n) {
        p[n] = eager ? std::exp(s[n] - m) : std::exp2(s[n] * c - m * c);
        sum += p[n];
      }
      for (int d = 0; d < f.head_dim; ++d) {
        float acc = 0;
        for (std::size_t n = 0; n < s.size(); ++n) {
          const float weight = eager ? round_to_bf16(p[n] / sum) : round_to_bf16(p[n]);
          acc += weight * f.values[kv][idx[n] * f.head_dim + d];
        }
        out[(t * f.num_heads + h) * f.head_dim + d] = round_to_bf16(eager ? acc : acc / sum);
      }
    }
  }
  return out;
}

TEST(AttentionTest, Bf16RoundingPointsOfBothBackends) {
  RaggedFixture f;
  f.bf16 = true;
  f.past = 120;
  f.chunk = 12;
  f.head_dim = 12;  // scale 12^-0.5 is not a power of two, so [q·k] then [·scale] round twice
  f.build(10);
  for (bool eager : {true, false}) {
    std::vector<float> out(f.queries.size());
    if (eager) {
      attention_eager(f.problem(), 5, out);
    } else {
      attention_sdpa(f.problem(), 1 << 20, out);  // one block: no rescaling
    }
    const std::vector<float> expected = spelled_out_bf16(f, eager);
    std::size_t exact = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i] == expected[i]) ++exact;
      EXPECT_LE(std::abs(out[i] - expected[i]), std::abs(expected[i]) * 0.0079f + 1e-6f)
          << (eager ? "eager" : "sdpa") << " element " << i;
    }
    EXPECT_GE(double(exact), 0.99 * double(out.size())) << (eager ? "eager" : "sdpa");
  }
}

TEST(AttentionTest, GqaMapsHeadsToKvHeadsByDivision) {
  // Two KV heads with constant, distinct values: query head h must return kv head h / 3's value.
  const int heads = 6, kv_heads = 2, dim = 4;
  std::vector<std::int32_t> pos = {0};
  std::vector<float> k0(dim, 0.0f), k1(dim, 0.0f), v0(dim, 1.0f), v1(dim, 2.0f);
  const std::vector<float> p0 = keys_to_panels(k0.data(), 1, dim);
  const std::vector<float> p1 = keys_to_panels(k1.data(), 1, dim);
  std::vector<KvHeadView> views = {{pos, k0, v0, p0}, {pos, k1, v1, p1}};
  std::vector<float> q(heads * dim, 0.5f);
  std::vector<std::int32_t> qpos = {0};
  AttentionProblem p{heads, kv_heads, dim, 0.5f, Rounding::none, q, qpos, views};
  for (bool eager : {true, false}) {
    std::vector<float> out(q.size());
    if (eager)
      attention_eager(p, 1, out);
    else
      attention_sdpa(p, 1, out);
    for (int h = 0; h < heads; ++h) EXPECT_EQ(out[h * dim], h / 3 == 0 ? 1.0f : 2.0f) << h;
  }
}

TEST(AttentionTest, RejectsMismatchedShapes) {
  RaggedFixture f;
  f.build(9);
  AttentionProblem p = f.problem();
  std::vector<float> too_small(f.queries.size() - 1);
  EXPECT_THROW(attention_eager(p, 4, too_small), std::invalid_argument);
  p.num_heads = 5;
  std::vector<float> out(f.queries.size());
  EXPECT_THROW(attention_sdpa(p, 4, out), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::cpu
