// The artefact methods (methods/qfilter.h, expected_attention_stats.h, duo_attention.h) and their
// file readers (methods/artefact_files.h): hand-computed scores and selections on small inputs,
// the file formats (every dtype, every rejected malformation naming the file and the field), the
// factory with the committed sample artefacts (tests/golden/artefacts/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "methods/artefact_files.h"
#include "methods/duo_attention.h"
#include "methods/expected_attention.h"
#include "methods/expected_attention_stats.h"
#include "methods/method_factory.h"
#include "methods/qfilter.h"
#include "methods/scorer_method.h"
#include "test_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

namespace fs = std::filesystem;
using testing::OwnedLayer;
using testing::zero_layer;

const std::string kArtefacts = std::string(KVAUDIT_SOURCE_DIR) + "/tests/golden/artefacts";

// A scratch directory per test binary run.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "kvaudit_artefacts_test";
  fs::create_directories(dir);
  return dir / name;
}

struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;
};

std::vector<unsigned char> f32_bytes(const std::vector<float>& v) {
  std::vector<unsigned char> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());  // little-endian host (x86-64, aarch64)
  return out;
}

std::vector<unsigned char> u16_bytes(const std::vector<std::uint16_t>& v) {
  std::vector<unsigned char> out;
  for (const auto x : v) {
    out.push_back(static_cast<unsigned char>(x & 0xff));
    out.push_back(static_cast<unsigned char>(x >> 8));
  }
  return out;
}

// Writes a safetensors file; `header_override` replaces the generated JSON header when non-empty.
std::string write_safetensors(const std::string& name, const std::vector<RawTensor>& tensors,
                              const std::string& header_override = "") {
  std::string header = "{";
  std::vector<unsigned char> data;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    std::string shape;
    for (std::size_t k = 0; k < t.shape.size(); ++k)
      shape += (k ? "," : "") + std::to_string(t.shape[k]);
    header += (i ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(data.size()) +
              "," + std::to_string(data.size() + t.bytes.size()) + "]}";
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  header += "}";
  if (!header_override.empty()) header = header_override;
  const fs::path path = scratch(name);
  std::ofstream out(path, std::ios::binary);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path.string();
}

std::string write_text(const std::string& name, const std::string& text) {
  const fs::path path = scratch(name);
  std::ofstream(path) << text;
  return path.string();
}

// The error message of `f`, or "" when it does not throw std::invalid_argument.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

DuoAttentionParams duo_params(int sink, int recent, bool on_the_fly = false) {
  DuoAttentionParams p;
  p.sink_size = sink;
  p.recent_size = recent;
  p.on_the_fly_scoring = on_the_fly;
  return p;
}

ExpectedAttentionStatsParams stats_params(int n_future_positions, int n_sink) {
  ExpectedAttentionStatsParams p;
  p.n_future_positions = n_future_positions;
  p.n_sink = n_sink;
  return p;
}

// ----------------------------------------------------------------------------------------------
// File readers.

TEST(ArtefactFiles, ReadsF32F16AndBf16Exactly) {
  // F16: 0x3C00 = 1, 0xC000 = −2, 0x0001 = 2^−24 (smallest subnormal), 0x7BFF = 65504 (largest).
  // BF16: 0x3F80 = 1, 0xC0A0 = −5, 0x3E20 = 0.15625.
  const std::string path = write_safetensors(
      "dtypes.safetensors", {{"a", "F32", {2}, f32_bytes({1.5f, -0.25f})},
                             {"h", "F16", {4}, u16_bytes({0x3C00, 0xC000, 0x0001, 0x7BFF})},
                             {"b", "BF16", {1, 3}, u16_bytes({0x3F80, 0xC0A0, 0x3E20})}});
  const auto t = read_safetensors_tensors(path, {"a", "h", "b"});
  EXPECT_EQ(t.at("a").values, (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(t.at("h").values, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}));
  EXPECT_EQ(t.at("b").values, (std::vector<float>{1.0f, -5.0f, 0.15625f}));
  EXPECT_EQ(t.at("b").shape, (std::vector<std::int64_t>{1, 3}));
}

TEST(ArtefactFiles, RejectsMalformedSafetensorsNamingFileAndField) {
  const auto ok = f32_bytes({1, 2});
  const std::string missing = write_safetensors("missing.safetensors", {{"x", "F32", {2}, ok}});
  EXPECT_EQ(error_of([&] { read_safetensors_tensors(missing, {"q_filters"}); }),
            missing + ": has no tensor 'q_filters' (it holds: x)");
  const std::string int32 = write_safetensors("int.safetensors", {{"q_filters", "I32", {2}, ok}});
  EXPECT_EQ(error_of([&] { read_safetensors_tensors(int32, {"q_filters"}); }),
            int32 + ": tensor 'q_filters' has dtype I32; F32, F16 or BF16 is required");
  const std::string nan = write_safetensors(
      "nan.safetensors", {{"q_filters", "F32", {2}, f32_bytes({1.0f, std::nanf("")})}});
  EXPECT_EQ(error_of([&] { read_safetensors_tensors(nan, {"q_filters"}); }),
            nan + ": tensor 'q_filters' holds a non-finite value at flat index 1");
  const std::string size = write_safetensors("size.safetensors", {{"q_filters", "F32", {3}, ok}});
  EXPECT_NE(error_of([&] { read_safetensors_tensors(size, {"q_filters"}); })
                .find("tensor 'q_filters': shape [3] of F32 needs 3 x 4 bytes but data_offsets "
                      "span 8"),
            std::string::npos);
  const std::string outside =
      write_safetensors("outside.safetensors", {{"q", "F32", {2}, ok}},
                        R"({"q":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})");
  EXPECT_NE(error_of([&] { read_safetensors_tensors(outside, {"q"}); }).find("outside the data"),
            std::string::npos);
  const std::string twice = write_safetensors(
      "twice.safetensors", {{"q", "F32", {2}, ok}},
      R"({"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})");
  EXPECT_EQ(error_of([&] { read_safetensors_tensors(twice, {"q"}); }),
            twice + ": safetensors header names tensor 'q' twice");
  const std::string not_json =
      write_safetensors("json.safetensors", {{"q", "F32", {2}, ok}}, "{\"q\": [1,");
  EXPECT_NE(error_of([&] { read_safetensors_tensors(not_json, {"q"}); }).find("not valid JSON"),
            std::string::npos);
  const std::string truncated = write_text("short.safetensors", "abc");
  EXPECT_NE(error_of([&] { read_safetensors_tensors(truncated, {"q"}); }).find("shorter"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_safetensors_tensors("/nonexistent/x.safetensors", {"q"});
            }).find("/nonexistent/x.safetensors: cannot open"),
            std::string::npos);
}

TEST(ArtefactFiles, ReadsDuoAttentionTsv) {
  // numpy.savetxt(..., delimiter="\t") writes %.18e; blank lines and CRLF are tolerated.
  const std::string path =
      write_text("pattern.tsv", "5.0e-01\t2.5e-01\r\n\n1.000000000000000000e+00\t0\n");
  const ArtefactMatrix m = read_tsv_matrix(path);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.columns, 2);
  EXPECT_EQ(m.values, (std::vector<double>{0.5, 0.25, 1.0, 0.0}));
  const std::string ragged = write_text("ragged.tsv", "1\t2\n3\n");
  EXPECT_EQ(error_of([&] { read_tsv_matrix(ragged); }),
            ragged + ": line 2 has 1 values, the first row 2");
  const std::string word = write_text("word.tsv", "1\tx2\n");
  EXPECT_EQ(error_of([&] { read_tsv_matrix(word); }),
            word + ": line 1: 'x2' is not a finite number");
  const std::string nan = write_text("nan.tsv", "1\tnan\n");
  EXPECT_EQ(error_of([&] { read_tsv_matrix(nan); }),
            nan + ": line 1: 'nan' is not a finite number");
  const std::string empty = write_text("empty.tsv", "\n");
  EXPECT_EQ(error_of([&] { read_tsv_matrix(empty); }), empty + ": holds no rows");
}

TEST(ArtefactFiles, PlanTimeChecksTheRanksAndShapes) {
  const std::string flat =
      write_safetensors("flat.safetensors", {{"q_filters", "F32", {2}, f32_bytes({1, 2})}});
  EXPECT_EQ(error_of([&] { check_qfilter_file(flat); }),
            "tensor 'q_filters' must be [layers, KV heads, head_dim], not [2]");
  const std::string stats = write_safetensors(
      "stats_mismatch.safetensors", {{"query_mean", "F32", {1, 1, 2}, f32_bytes({0, 0})},
                                     {"query_cov", "F32", {1, 1, 2, 1}, f32_bytes({0, 0})}});
  EXPECT_NE(error_of([&] {
              check_expected_attention_stats_file(stats);
            }).find("query_cov [1, 1, 2, 1] does not match query_mean [1, 1, 2]"),
            std::string::npos);
  // Plan-time messages leave the path out (the plan prefixes position and path).
  const std::string ragged = write_text("plan_ragged.tsv", "1\t2\n3\n");
  EXPECT_EQ(error_of([&] { check_duo_attention_pattern_file(ragged); }),
            "line 2 has 1 values, the first row 2");
  // The committed sample artefacts pass.
  EXPECT_EQ(error_of([&] { check_qfilter_file(kArtefacts + "/qfilter_tiny/model.safetensors"); }),
            "");
  EXPECT_EQ(
      error_of([&] {
        check_expected_attention_stats_file(kArtefacts + "/ea_stats_llama_bf16/model.safetensors");
      }),
      "");
  EXPECT_EQ(error_of([&] {
              check_duo_attention_pattern_file(kArtefacts + "/duo_pattern_llama_f32.tsv");
            }),
            "");
}

// ----------------------------------------------------------------------------------------------
// QFilter.

// One layer of 2 layers, 1 KV head, d = 2, L = 3: k0 = (1, 0), k1 = (0, 1), k2 = (2, 1).
OwnedLayer qfilter_layer(int layer_index) {
  OwnedLayer o = zero_layer(1, 1, 3, 2);
  o.layer = layer_index;
  o.num_layers = 2;
  o.keys[0] = {1, 0, 0, 1, 2, 1};
  return o;
}

TEST(QFilter, ScoresAreMinusTheFilterProjection) {
  // Layer 0 filter f = (1, −2): s = −f·k = (−1, 2, 0). Layer 1 filter (0, 1): s = (0, −1, −1).
  QFilterScorer scorer({{2, 1, 2}, {1, -2, 0, 1}}, "test filters");
  std::vector<float> s(3);
  scorer.score(qfilter_layer(0).view(), {}, s);
  EXPECT_EQ(s, (std::vector<float>{-1, 2, 0}));
  scorer.score(qfilter_layer(1).view(), {}, s);
  EXPECT_EQ(s, (std::vector<float>{0, -1, -1}));
}

TEST(QFilter, KeepsTheHighestScoresPerHead) {
  ScorerMethod method(
      std::make_shared<QFilterScorer>(ArtefactTensor{{2, 1, 2}, {1, -2, 0, 1}}, "test"));
  const OwnedLayer layer0 = qfilter_layer(0), layer1 = qfilter_layer(1);
  const std::vector<LayerCapture> layers = {layer0.view(), layer1.view()};
  // cr 0.5: n_kept = floor(1.5) = 1 → layer 0 keeps position 1 (score 2); layer 1 keeps 0.
  auto kept = method.select(layers, {.compression = 0.5}, {}).kept;
  EXPECT_EQ(kept[0][0], (std::vector<std::int32_t>{1}));
  EXPECT_EQ(kept[1][0], (std::vector<std::int32_t>{0}));
  // cr 0.25: n_kept = floor(2.25) = 2 → {1, 2} (scores 2, 0) in layer 0.
  kept = method.select(layers, {.compression = 0.25}, {}).kept;
  EXPECT_EQ(kept[0][0], (std::vector<std::int32_t>{1, 2}));
  // cr 0.9: n_kept = max(1, floor(0.3)) = 1.
  kept = method.select(layers, {.compression = 0.9}, {}).kept;
  EXPECT_EQ(kept[0][0].size(), 1u);
}

TEST(QFilter, Bf16RoundsEachProductAndTheSum) {
  // f = k = 1 + 2^−7 (both bf16): f·k = 1 + 2^−6 + 2^−14, which bf16 (7 explicit mantissa bits)
  // rounds to 1 + 2^−6 = 1.015625; in f32 the product is kept: −1.0156860...
  OwnedLayer o = zero_layer(1, 1, 1, 2);
  const float x = 1.0f + std::ldexp(1.0f, -7);
  o.keys[0] = {x, 0};
  QFilterScorer scorer({{1, 1, 2}, {x, 0}}, "test");
  std::vector<float> s(1);
  o.bf16 = true;
  scorer.score(o.view(), {}, s);
  EXPECT_EQ(s[0], -1.015625f);
  o.bf16 = false;
  scorer.score(o.view(), {}, s);
  EXPECT_EQ(s[0], -(x * x));
}

TEST(QFilter, FiltersOfAnotherModelAreRejectedNamingTheFile) {
  QFilterScorer scorer({{2, 2, 2}, std::vector<float>(8, 0.0f)}, "/data/q.safetensors");
  std::vector<float> s(3);
  EXPECT_EQ(error_of([&] { scorer.score(qfilter_layer(0).view(), {}, s); }),
            "/data/q.safetensors: q_filters is [2, 2, 2] but the model has 2 layers, 1 KV heads "
            "and head_dim 2 (the filters belong to another model)");
}

// ----------------------------------------------------------------------------------------------
// ExpectedAttentionStats.

TEST(ExpectedAttentionStats, HandComputedScores) {
  // d = 2, rope_inv_freq = 0 (R̄ = I), L = 4, n_sink = 1, one head. μ = (√2, 0), Σ = diag(0, 4):
  //   z(j) = μ·k/√2 + kᵀΣk/(2·2) = k_x + k_y²;  k1 = (1, 0), k2 = (0, 1), k3 = (2, 0) → z = 1, 1, 2
  //   a = softmax = (1, 1, e)/(2 + e);  ‖v‖ = 1, 2, 5 → s = (1, 2, 5e)/(2 + e) = 0.21194,
  //   0.42388, 2.88061; the sink gets max + 1 = 3.88061.
  OwnedLayer o = zero_layer(1, 1, 4, 2);
  o.keys[0] = {5, 5, 1, 0, 0, 1, 2, 0};
  o.values[0] = {0, 0, 1, 0, 0, 2, 3, 4};
  o.rope_inv_freq = {0.0f};
  ExpectedAttentionStatsParams params;
  params.n_sink = 1;
  ExpectedAttentionStatsScorer scorer(params, {{1, 1, 2}, {std::sqrt(2.0f), 0}},
                                      {{1, 1, 2, 2}, {0, 0, 0, 4}}, "test");
  std::vector<float> s(4);
  scorer.score(o.view(), {}, s);
  const double e = std::exp(1.0);
  EXPECT_NEAR(s[1], 1 / (2 + e), 1e-6);
  EXPECT_NEAR(s[2], 2 / (2 + e), 1e-6);
  EXPECT_NEAR(s[3], 5 * e / (2 + e), 1e-6);
  EXPECT_NEAR(s[0], 5 * e / (2 + e) + 1, 1e-6);
}

TEST(ExpectedAttentionStats, EqualsExpectedAttentionGivenTheSameMoments) {
  // With μ, Σ set to the prompt's own moments (Σq/n, Σqqᵀ/n − μμᵀ), the file-based scorer must
  // give ExpectedAttention's scores: this checks the averaged rotation (real RoPE frequencies),
  // the GQA mean and the value norms against the reference implementation.
  OwnedLayer o = zero_layer(1, 2, 7, 4);
  o.rope_inv_freq = {1.0f, 0.01f};
  for (std::size_t i = 0; i < o.keys[0].size(); ++i) {
    o.keys[0][i] = std::sin(0.7f * static_cast<float>(i)) * 1.5f;
    o.values[0][i] = std::cos(0.3f * static_cast<float>(i));
  }
  o.moments_first_row = 4;
  o.query_count = 3;
  const std::size_t H = 2, d = 4;
  o.query_sum.assign(H * d, 0.0);
  o.query_outer.assign(H * d * d, 0.0);
  std::vector<float> mean(H * d), cov(H * d * d);
  for (std::size_t h = 0; h < H; ++h) {
    for (int row = 0; row < 3; ++row) {
      double q[4];
      for (std::size_t c = 0; c < d; ++c)
        q[c] = std::sin(1.3 * static_cast<double>(row * 4 + static_cast<int>(c)) +
                        static_cast<double>(h));
      for (std::size_t a = 0; a < d; ++a) {
        o.query_sum[h * d + a] += q[a];
        for (std::size_t b = 0; b < d; ++b) o.query_outer[(h * d + a) * d + b] += q[a] * q[b];
      }
    }
    for (std::size_t a = 0; a < d; ++a)
      mean[h * d + a] = static_cast<float>(o.query_sum[h * d + a] / 3);
    for (std::size_t a = 0; a < d; ++a)
      for (std::size_t b = 0; b < d; ++b)
        cov[(h * d + a) * d + b] =
            static_cast<float>(o.query_outer[(h * d + a) * d + b] / 3 -
                               o.query_sum[h * d + a] / 3 * o.query_sum[h * d + b] / 3);
  }
  ExpectedAttentionScorer reference({.n_future_positions = 16});
  ExpectedAttentionStatsScorer stats(stats_params(16, 4), {{1, 2, 4}, mean}, {{1, 2, 4, 4}, cov},
                                     "test");
  std::vector<float> want(7), got(7);
  reference.score(o.view(), {}, want);
  stats.score(o.view(), {}, got);
  for (std::size_t j = 0; j < 7; ++j) EXPECT_NEAR(got[j], want[j], 1e-5 * (1 + std::fabs(want[j])));
}

TEST(ExpectedAttentionStats, StatisticsOfAnotherModelAreRejectedNamingTheFile) {
  OwnedLayer o = zero_layer(1, 1, 4, 2);
  o.rope_inv_freq = {0.0f};
  ExpectedAttentionStatsScorer scorer({}, {{1, 2, 2}, std::vector<float>(4)},
                                      {{1, 2, 2, 2}, std::vector<float>(8)}, "/s.safetensors");
  std::vector<float> s(4);
  EXPECT_EQ(error_of([&] { scorer.score(o.view(), {}, s); }),
            "/s.safetensors: query_mean is [1, 2, 2] but the model has 1 layers, 1 query heads "
            "and head_dim 2 (the statistics belong to another model)");
  // L ≤ n_sink (kvpress asserts L > n_sink).
  ExpectedAttentionStatsScorer sinks(stats_params(512, 4), {{1, 1, 2}, std::vector<float>(2)},
                                     {{1, 1, 2, 2}, std::vector<float>(4)}, "t");
  EXPECT_NE(error_of([&] { sinks.score(o.view(), {}, s); }).find("length must exceed n_sink"),
            std::string::npos);
}

// ----------------------------------------------------------------------------------------------
// DuoAttention.

TEST(DuoAttention, StreamingHeadsKeepSinksAndRecentTokens) {
  // L = 10, sink 2, recent 3: [0, 2) ∪ [7, 10).
  EXPECT_EQ(duo_kept_positions(10, true, 2, 3), (std::vector<std::int32_t>{0, 1, 7, 8, 9}));
  EXPECT_EQ(duo_kept_positions(10, false, 2, 3).size(), 10u);
  // sink ≥ L − recent: kvpress's slice sink:−recent is empty, the head keeps everything.
  EXPECT_EQ(duo_kept_positions(10, true, 5, 5).size(), 10u);
  EXPECT_EQ(duo_kept_positions(10, true, 4, 5),
            (std::vector<std::int32_t>{0, 1, 2, 3, 5, 6, 7, 8, 9}));
  EXPECT_EQ(duo_kept_positions(10, true, 128, 256).size(), 10u);
  EXPECT_EQ(duo_kept_positions(10, true, 0, 1), (std::vector<std::int32_t>{9}));
}

std::vector<LayerCapture> two_layers(std::vector<OwnedLayer>& owned, int L) {
  owned = {zero_layer(2, 2, L, 2), zero_layer(2, 2, L, 2)};
  owned[0].num_layers = owned[1].num_layers = 2;
  owned[1].layer = 1;
  return {owned[0].view(), owned[1].view()};
}

TEST(DuoAttention, TheLowestHeadScoresBecomeStreaming) {
  // Scores [[0.9, 0.1], [0.5, 0.3]]; sink 1, recent 2, L = 6 → streaming heads keep {0, 4, 5}.
  const DuoAttentionParams p = duo_params(1, 2);
  DuoAttentionMethod method(p, {2, 2, {0.9, 0.1, 0.5, 0.3}}, "test");
  std::vector<OwnedLayer> owned;
  const auto layers = two_layers(owned, 6);
  const std::vector<std::int32_t> all{0, 1, 2, 3, 4, 5}, streaming{0, 4, 5};
  // ρ = 0.5: n_pruned = round(2.0) = 2 → (0, 1) and (1, 1).
  auto kept = method.select(layers, {.compression = 0.5}, {}).kept;
  EXPECT_EQ(kept[0][0], all);
  EXPECT_EQ(kept[0][1], streaming);
  EXPECT_EQ(kept[1][0], all);
  EXPECT_EQ(kept[1][1], streaming);
  // ρ = 0.25: round(1.0) = 1 → only (0, 1).
  kept = method.select(layers, {.compression = 0.25}, {}).kept;
  EXPECT_EQ(kept[1][1], all);
  EXPECT_EQ(kept[0][1], streaming);
  // ρ = 0.625: 4·0.625 = 2.5 → Python round → 2 (half to even), not 3.
  kept = method.select(layers, {.compression = 0.625}, {}).kept;
  EXPECT_EQ(kept[1][0], all);
  // ρ = 0.875: 3.5 → 4: every head streams.
  kept = method.select(layers, {.compression = 0.875}, {}).kept;
  EXPECT_EQ(kept[0][0], streaming);
  // ρ = 0: nothing streams.
  kept = method.select(layers, {.compression = 0.0}, {}).kept;
  EXPECT_EQ(kept[0][1], all);
}

TEST(DuoAttention, PatternValuesAreClippedToZeroOneAndTiesGoToTheLowerIndex) {
  // [[2, 1.5], [−1, −3]] clips to [[1, 1], [0, 0]]: without the clip (1, 1) = −3 would stream
  // first; with it (1, 0) and (1, 1) tie and the lower flat index (1, 0) streams.
  DuoAttentionMethod method(duo_params(1, 1), {2, 2, {2, 1.5, -1, -3}}, "t");
  std::vector<OwnedLayer> owned;
  const auto layers = two_layers(owned, 4);
  const auto kept = method.select(layers, {.compression = 0.25}, {}).kept;
  EXPECT_EQ(kept[1][0], (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(kept[1][1].size(), 4u);
}

TEST(DuoAttention, APatternOfAnotherShapeIsRejectedNamingTheFile) {
  DuoAttentionMethod method({}, {1, 2, {0.5, 0.5}}, "/p/full_attention_heads.tsv");
  std::vector<OwnedLayer> owned;
  const auto layers = two_layers(owned, 4);
  EXPECT_EQ(error_of([&] { method.select(layers, {.compression = 0.5}, {}); }),
            "/p/full_attention_heads.tsv: the pattern is 1 x 2 but the model has 2 layers and 2 "
            "KV heads (want one row per layer, one column per KV head)");
}

TEST(DuoAttention, OnTheFlyScoresAreTheAreaUnderTheCumulatedAttention) {
  // d = 2, one frequency θ: q̄ = (a, 0), k̄ = (b, 0) → Q_499·K_p = a·b·cos((499 − p)θ), so
  // a_p = softmax_p(ab·cos((499 − p)θ)/√2) and r = (1/500)·Σ_i Σ_{p≤i} a_p — computed here
  // directly from that closed form. Two query heads share the KV head (their mean). The rows
  // average to the means: queries (a ± 1, ±1), keys (b ± 2, ∓2).
  const float theta = 0.05f;
  const double a0 = 1.5, a1 = -0.5, b = 2.0;
  OwnedLayer o = zero_layer(1, 2, 2, 2);
  o.rope_inv_freq = {theta};
  const std::vector<float> q_pre = {static_cast<float>(a0 + 1), 1, static_cast<float>(a0 - 1), -1,
                                    static_cast<float>(a1 + 1), 1, static_cast<float>(a1 - 1), -1};
  const std::vector<float> k_pre = {static_cast<float>(b + 2), -2, static_cast<float>(b - 2), 2};
  LayerCapture c = o.view();
  c.queries_prerope = q_pre;
  c.keys_prerope = k_pre;
  auto expected = [&](double a) {
    std::vector<double> logits(500);
    double m = -1e300, total = 0, cumulated = 0, area = 0;
    for (int p = 0; p < 500; ++p) {
      const double angle = static_cast<double>(static_cast<float>(499) * theta) -
                           static_cast<double>(static_cast<float>(p) * theta);
      logits[static_cast<std::size_t>(p)] = a * b * std::cos(angle) / std::sqrt(2.0);
      m = std::max(m, logits[static_cast<std::size_t>(p)]);
    }
    for (double& l : logits) total += (l = std::exp(l - m));
    for (const double l : logits) area += (cumulated += l / total);
    return area / 500;
  };
  const auto r = duo_on_the_fly_head_scores(c);
  ASSERT_EQ(r.size(), 1u);
  // The rotation uses f32 cos/sin of each angle; the closed form the cosine of their difference.
  EXPECT_NEAR(r[0], (expected(a0) + expected(a1)) / 2, 1e-6);
  // Without a signal (a = 0) the attention is uniform: r = (1/500)·Σ_i (i + 1)/500 = 0.501.
  EXPECT_NEAR(expected(0.0), 0.501, 1e-12);
}

TEST(DuoAttention, OnTheFlyNeedsTheAllQueriesCapture) {
  DuoAttentionMethod method(duo_params(128, 256, true));
  EXPECT_TRUE(method.needs_all_queries());
  EXPECT_FALSE(DuoAttentionMethod({}, {1, 1, {0.5}}, "t").needs_all_queries());
  std::vector<OwnedLayer> owned;
  auto layers = two_layers(owned, 4);
  EXPECT_NE(error_of([&] {
              method.select(layers, {.compression = 0.5}, {});
            }).find("queries_prerope [H, L, d] and keys_prerope [Hkv, L, d] are required"),
            std::string::npos);
}

// ----------------------------------------------------------------------------------------------
// Factory and catalogue: the committed sample artefacts, variants, and errors.

TEST(ArtefactMethods, TheFactoryReadsTheCommittedArtefacts) {
  const auto q = make_method(
      {"q", "qfilter", "", {{"filters", kArtefacts + "/qfilter_tiny/model.safetensors"}}});
  EXPECT_EQ(q->name(), "qfilter");
  const auto s =
      make_method({"s",
                   "expected_attention_stats",
                   "",
                   {{"statistics", kArtefacts + "/ea_stats_llama_bf16/model.safetensors"}}});
  EXPECT_EQ(s->name(), "expected_attention_stats");
  EXPECT_FALSE(s->needs_query_moments());
  const auto d = make_method(
      {"d", "duo_attention", "", {{"pattern", kArtefacts + "/duo_pattern_llama_f32.tsv"}}});
  EXPECT_FALSE(d->needs_all_queries());
  EXPECT_EQ(std::get<DuoAttentionParams>(d->parameters()).sink_size, 128);
  EXPECT_EQ(std::get<DuoAttentionParams>(d->parameters()).recent_size, 256);
  const auto fly = make_method({"f", "duo_attention", "on_the_fly", {}});
  EXPECT_TRUE(fly->needs_all_queries());
  // As the manifest hands it to the run: the parser writes the variant's defaults into the
  // config, here on_the_fly's "no file" pattern "" (a run once failed on exactly this).
  const auto fly_from_manifest =
      make_method({"f", "duo_attention", "on_the_fly", {{"pattern", std::string()}}});
  EXPECT_TRUE(fly_from_manifest->needs_all_queries());
  // "" is only the on_the_fly default: the pattern variant still needs a file.
  EXPECT_NE(error_of([] {
              make_method({"d", "duo_attention", "pattern", {{"pattern", std::string()}}});
            }).find("pattern"),
            std::string::npos);
  // Scorers: a wrapper can take them.
  EXPECT_NE(
      make_scorer(
          {"q", "qfilter", "", {{"filters", kArtefacts + "/qfilter_tiny/model.safetensors"}}}),
      nullptr);
}

TEST(ArtefactMethods, ConfigurationErrors) {
  // The pattern variant requires its file; on_the_fly refuses one it would not read.
  EXPECT_NE(error_of([] {
              make_method({"d", "duo_attention", "", {}});
            }).find("pattern"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              make_method({"d",
                           "duo_attention",
                           "on_the_fly",
                           {{"pattern", kArtefacts + "/duo_pattern_llama_f32.tsv"}}});
            }).find("reads no pattern"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              make_method({"d",
                           "duo_attention",
                           "",
                           {{"pattern", kArtefacts + "/duo_pattern_llama_f32.tsv"},
                            {"recent_size", std::int64_t{0}}}});
            }),
            "");
  // A statistics file given as filters: the error names the file and the missing tensor.
  const std::string stats = kArtefacts + "/ea_stats_llama_f32/model.safetensors";
  EXPECT_EQ(error_of([&] {
              make_method({"q", "qfilter", "", {{"filters", stats}}});
            }),
            stats + ": has no tensor 'q_filters' (it holds: query_cov, query_mean)");
}

}  // namespace
}  // namespace kvaudit::methods
