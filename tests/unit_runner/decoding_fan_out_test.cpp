// Decode-time compression in the unit runner (docs/design/decoding.md §run_unit): cells with a
// DecodingCell decode through generate_greedy_compressing, the others as before. On the tiny
// models with the CPU engine, for DecodingPress(KNorm) and DecodingPress(SnapKV window 3) on a
// full-KV cell, PrefillDecodingPress(SnapKV, KNorm) under query-agnostic and (KNorm, KNorm) under
// query-aware, and reuse cells with a decoding setting:
//   (a) the fan-out equals the naive route (ids, stop flag, kept sets, peak and final bytes,
//       compressions);
//   (b) the fan-out equals generate_greedy_compressing called directly on the cell's compressed
//       cache (prefill, retain the cell's kept sets, feed the rest: the reference the kvpress
//       parity test ties to kvpress, tests/methods/kvpress_decoding_parity_test.cpp);
//   (c) batches of 1, 2 and all cells, mixing cells with and without a setting, give each cell the
//       same result;
//   (d) a cell without a setting gives exactly what it gives in a unit without decoding cells.
// Also: failures stay in their cell (a throwing decode-time method, a head-adaptive prefill
// method, an engine without observed decode steps) and invalid settings are refused. CAM cells
// (merge_budget > 0) and CompressionRatioDecodingPress cells (target_compression_ratio) equal the
// naive route and the direct call too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "methods/knorm.h"
#include "methods/merging.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/core_only_engine.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using testing::decoding_test_options;
using testing::describe_cell;
using testing::expect_same_decode;
using testing::load_tiny_model;
using testing::random_tokens;
using testing::tiny_unit_tokens;

constexpr int kNewTokens = 20;  // 19 decode steps

// The methods and decoding settings of the tests (kvpress's defaults scaled to the tiny unit:
// intervals 4 and 5, targets 24 and 20: the cache holds 50–70 entries when decoding starts).
struct DecodingMethods {
  methods::ScorerMethod knorm{std::make_shared<methods::KnormScorer>()};
  methods::ScorerMethod snapkv{
      std::make_shared<methods::SnapKvScorer>(methods::SnapKvParams{.window = 8})};
  methods::ScorerMethod snapkv_window3{
      std::make_shared<methods::SnapKvScorer>(methods::SnapKvParams{.window = 3})};
  DecodingCell knorm_decoding{&knorm,
                              {.compression_interval = 4,
                               .target_size = 24,
                               .hidden_states_buffer_size = 256,
                               .query_positions = BufferedQueryPositions::current_step}};
  DecodingCell snapkv_decoding{&snapkv_window3,
                               {.compression_interval = 5,
                                .target_size = 20,
                                .hidden_states_buffer_size = 2,
                                .query_positions = BufferedQueryPositions::current_step}};

  // Cells 0 and 3 have no decoding setting.
  std::vector<CellSpec> cells(Protocol agnostic = Protocol::query_agnostic) const {
    std::vector<CellSpec> c = {
        {nullptr, {}, agnostic, 1, nullptr},
        {nullptr, {}, agnostic, 2, &knorm_decoding},                    // DecodingPress(KNorm)
        {&snapkv, {.compression = 0.5}, agnostic, 3, &knorm_decoding},  // PrefillDecodingPress
        {&snapkv, {.compression = 0.5}, agnostic, 4, nullptr},
        {nullptr, {}, agnostic, 5, &snapkv_decoding},  // DecodingPress(SnapKV window 3)
    };
    if (agnostic == Protocol::query_agnostic) {
      c.push_back({&knorm, {.compression = 0.5}, Protocol::query_aware, 6, &knorm_decoding});
    }
    return c;
  }
};

UnitTokens tiny_reuse_unit(int vocab, std::uint32_t seed) {
  UnitTokens t;
  t.context = random_tokens(48, vocab, seed);
  const int question_lengths[] = {9, 0, 4};
  for (int j = 0; j < 3; ++j) {
    const std::uint32_t s = seed + 10 * static_cast<std::uint32_t>(j + 1);
    t.reuse_questions.push_back(
        {random_tokens(question_lengths[j], vocab, s), random_tokens(3 + j, vocab, s + 1)});
  }
  return t;
}

// The fields that say whether the cell compressed while decoding.
void expect_decoding_fields(const CellSpec& spec, const CellResult& cell,
                            const std::string& where) {
  ASSERT_EQ(cell.status, CellStatus::ok) << where << ": " << cell.error;
  EXPECT_EQ(cell.generated.size(), static_cast<std::size_t>(kNewTokens)) << where;
  if (spec.decoding == nullptr) {
    EXPECT_EQ(cell.decode_compressions, 0) << where;
    EXPECT_EQ(cell.final_kv_bytes, cell.peak_kv_bytes) << where;
    EXPECT_TRUE(std::isnan(cell.compression_seconds)) << where;
  } else {
    // kNewTokens − 1 decode steps, a compression every compression_interval of them.
    EXPECT_EQ(cell.decode_compressions,
              (kNewTokens - 1) / spec.decoding->policy.compression_interval)
        << where;
    EXPECT_LT(cell.final_kv_bytes, cell.peak_kv_bytes) << where;
    EXPECT_GE(cell.peak_kv_bytes, cell.kept_bytes) << where;
    EXPECT_TRUE(std::isfinite(cell.compression_seconds) && cell.compression_seconds >= 0.0)
        << where;
    EXPECT_TRUE(std::isfinite(cell.decode_seconds)) << where;
  }
}

// (b): the cell's compressed cache built by hand (a prefill of its boundary, retain of its kept
// sets, a prefill of `rest`), then generate_greedy_compressing with the cell's own method, policy
// and selection context.
CompressingOutput direct_compressing(CpuModel& model, const CellSpec& spec, const CellResult& cell,
                                     std::span<const std::int32_t> prompt,
                                     std::span<const std::int32_t> rest,
                                     const UnitRunOptions& options) {
  std::unique_ptr<SequenceCache> cache = model.new_cache(0);
  model.prefill(*cache, prompt.first(static_cast<std::size_t>(cell.boundary)), LogitRows::none);
  if (spec.method != nullptr) cache->retain(*cell.selection);
  const LogitMatrix last = model.prefill(*cache, rest, LogitRows::last);
  const CompressingSequence sequence{.cache = cache.get(),
                                     .last_logits = last.row(0),
                                     .method = spec.decoding->method,
                                     .policy = spec.decoding->policy,
                                     .context = {.seed = options.seed, .cell_key = spec.cell_key}};
  return generate_greedy_compressing(model, {&sequence, 1},
                                     {.max_new_tokens = options.decode.max_new_tokens,
                                      .eos_token_ids = options.decode.stop_token_ids})
      .front();
}

void expect_equals_direct(const CellResult& cell, const CompressingOutput& direct,
                          const std::string& where) {
  EXPECT_EQ(cell.generated, direct.greedy.tokens) << where << ": ids differ from the direct call";
  EXPECT_EQ(cell.stopped_on_stop_token, direct.greedy.stopped_on_eos) << where;
  EXPECT_EQ(cell.peak_kv_bytes, static_cast<std::int64_t>(direct.peak_kept_bytes)) << where;
  EXPECT_EQ(cell.final_kv_bytes, static_cast<std::int64_t>(direct.final_kept_bytes)) << where;
  EXPECT_EQ(cell.decode_compressions, direct.compressions) << where;
}

TEST(DecodingFanOut, EqualsNaiveTheDirectCallAndLeavesOtherCellsAlone) {
  const DecodingMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const std::vector<CellSpec> plain_only = {cells[0], cells[3]};
  int compressing_checked = 0;
  for (const auto& [family, dtype] : std::vector<std::pair<std::string, std::string>>{
           {"llama", "f32"}, {"llama", "bf16"}, {"qwen2", "f32"}}) {
    const model::ModelWeights weights = load_tiny_model(family, dtype);
    CpuModel model(weights, AttentionBackend::sdpa);
    const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
    const UnitRunOptions options = decoding_test_options(kNewTokens);
    const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
    const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
    const UnitResult without = run_unit(model, weights, tokens, plain_only, options);
    ASSERT_EQ(fan_out.cells.size(), cells.size());
    ASSERT_EQ(naive.cells.size(), cells.size());
    std::vector<std::int32_t> prompt = tokens.context;
    prompt.insert(prompt.end(), tokens.question.begin(), tokens.question.end());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string where =
          family + " " + dtype + ": cell " + std::to_string(i) + " (" + describe_cell(cells[i]) +
          (cells[i].decoding != nullptr ? " + decoding " + cells[i].decoding->method->name() : "") +
          ")";
      const CellResult& cell = fan_out.cells[i];
      expect_decoding_fields(cells[i], cell, where);
      expect_same_decode(cell, naive.cells[i], where + " (vs naive)");
      if (cells[i].decoding == nullptr) continue;
      const std::vector<std::int32_t> rest = [&] {
        std::vector<std::int32_t> ids(prompt.begin() + cell.boundary, prompt.end());
        ids.insert(ids.end(), tokens.suffix.begin(), tokens.suffix.end());
        return ids;
      }();
      expect_equals_direct(cell, direct_compressing(model, cells[i], cell, prompt, rest, options),
                           where + " (vs generate_greedy_compressing)");
      ++compressing_checked;
    }
    // (d) The cells without a setting, as in a unit without decoding cells.
    expect_same_decode(fan_out.cells[0], without.cells[0], family + " " + dtype + ": full KV");
    expect_same_decode(fan_out.cells[3], without.cells[1], family + " " + dtype + ": snapkv");
    // The setting matters: the same prefill with and without it differ in what they keep.
    EXPECT_LT(fan_out.cells[1].final_kv_bytes, fan_out.cells[0].final_kv_bytes);
    EXPECT_LT(fan_out.cells[2].final_kv_bytes, fan_out.cells[3].final_kv_bytes);
  }
  EXPECT_EQ(compressing_checked, 12);
}

TEST(DecodingFanOut, BatchesMixingSettingsGiveEachCellItsResultAlone) {
  const DecodingMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  CpuModel model(weights, AttentionBackend::eager);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 23);
  const UnitResult alone =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, 1));
  for (const int batch : {2, 4, 0}) {
    const UnitResult batched =
        run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, batch));
    ASSERT_EQ(batched.cells.size(), cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string where = "max_batch_cells " + std::to_string(batch) + ": cell " +
                                std::to_string(i) + " (" + describe_cell(cells[i]) + ")";
      expect_decoding_fields(cells[i], batched.cells[i], where);
      expect_same_decode(batched.cells[i], alone.cells[i], where);
      // With 4 or all cells per batch every decoding cell shares its batch's decode steps with
      // another (its compressions stay its own: compression_seconds).
      if ((batch == 4 || batch == 0) && cells[i].decoding != nullptr) {
        EXPECT_NE(batched.cells[i].shared_costs & kDecodeShare, 0u) << where;
      }
    }
  }
}

TEST(DecodingFanOut, ReuseRowsDecodeWithTheirCellsSetting) {
  const DecodingMethods methods;
  const std::vector<CellSpec> cells = methods.cells(Protocol::reuse);
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_reuse_unit(model.config().vocab_size, 5);
  const std::size_t k = tokens.reuse_questions.size();
  const UnitResult fan_out =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens));
  const UnitResult naive =
      run_unit_naive(model, weights, tokens, cells, decoding_test_options(kNewTokens));
  const UnitResult one_by_one =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, 1));
  ASSERT_EQ(fan_out.cells.size(), cells.size() * k);
  ASSERT_EQ(naive.cells.size(), cells.size() * k);
  ASSERT_EQ(one_by_one.cells.size(), cells.size() * k);
  int answers_differ = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::string where = "cell " + std::to_string(i) + " (" + describe_cell(cells[i]) +
                                ") question " + std::to_string(j);
      const CellResult& row = fan_out.cells[i * k + j];
      EXPECT_EQ(row.cell, static_cast<int>(i)) << where;
      EXPECT_EQ(row.question, static_cast<int>(j)) << where;
      expect_decoding_fields(cells[i], row, where);
      expect_same_decode(row, naive.cells[i * k + j], where + " (vs naive)");
      expect_same_decode(row, one_by_one.cells[i * k + j], where + " (vs batches of 1)");
      if (cells[i].decoding == nullptr) continue;
      std::vector<std::int32_t> rest = tokens.reuse_questions[j].question;
      rest.insert(rest.end(), tokens.reuse_questions[j].suffix.begin(),
                  tokens.reuse_questions[j].suffix.end());
      expect_equals_direct(row,
                           direct_compressing(model, cells[i], row, tokens.context, rest,
                                              decoding_test_options(kNewTokens)),
                           where + " (vs generate_greedy_compressing)");
      if (j > 0 && row.generated != fan_out.cells[i * k].generated) ++answers_differ;
    }
  }
  EXPECT_GT(answers_differ, 0) << "every question gave the same answer: the rows are not distinct";
}

TEST(DecodingFanOut, AFailingDecodingMethodFailsOnlyItsCell) {
  const DecodingMethods methods;
  const auto throwing = testing::make_throwing_method();
  const auto ragged = testing::make_top_k_method(testing::TestScore::key_norm, true);
  const auto out_of_range = testing::make_out_of_range_method();
  const DecodingCell throwing_decoding{throwing.get(), methods.knorm_decoding.policy};
  const DecodingCell out_of_range_decoding{out_of_range.get(), methods.knorm_decoding.policy};
  std::vector<CellSpec> cells = methods.cells();
  cells.push_back({nullptr, {}, Protocol::query_agnostic, 7, &throwing_decoding});
  cells.push_back({ragged.get(),
                   {.compression = 0.5},
                   Protocol::query_agnostic,
                   8,
                   &methods.knorm_decoding});  // AdaKV-like ragged heads before decoding
  cells.push_back({nullptr, {}, Protocol::query_agnostic, 9, &out_of_range_decoding});
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
  const std::vector<CellSpec> good(cells.begin(), cells.begin() + 6);
  const UnitResult reference =
      run_unit(model, weights, tokens, good, decoding_test_options(kNewTokens));
  for (auto* route : {&run_unit, &run_unit_naive}) {
    const UnitResult result =
        (*route)(model, weights, tokens, cells, decoding_test_options(kNewTokens));
    for (std::size_t i = 0; i < good.size(); ++i) {
      expect_same_decode(result.cells[i], reference.cells[i], "cell " + std::to_string(i));
    }
    EXPECT_EQ(result.cells[6].status, CellStatus::failed);
    EXPECT_NE(result.cells[6].error.find("decode-time compression failed: method "),
              std::string::npos)
        << result.cells[6].error;
    EXPECT_TRUE(result.cells[6].generated.empty());
    EXPECT_EQ(result.cells[7].status, CellStatus::failed);
    EXPECT_NE(result.cells[7].error.find("head-adaptive prefill method"), std::string::npos)
        << result.cells[7].error;
    EXPECT_EQ(result.cells[8].status, CellStatus::failed);
    EXPECT_NE(result.cells[8].error.find("not strictly ascending"), std::string::npos)
        << result.cells[8].error;
  }
}

// CAM (DecodingPolicy::merge_budget > 0, runners/unit/cam_merging.h) through the unit runner: on a
// full-KV cell and after a SnapKV prefill it equals the naive route and the direct call (the same
// Philox merge draws, keyed by the study seed and the cell), compresses every interval, and a CAM
// setting over a method that is not a plain scorer, or over a scorer that throws while decoding,
// fails only its cell.
TEST(DecodingFanOut, CamCellsEqualNaiveAndTheDirectCallAndABadBaseFailsOnlyItsCell) {
  const DecodingMethods methods;
  const DecodingCell cam{&methods.knorm,
                         {.compression_interval = 4,
                          .target_size = 24,
                          .hidden_states_buffer_size = 256,
                          .query_positions = BufferedQueryPositions::current_step,
                          .merge_budget = 3}};
  const methods::MergingMethod merging(std::make_shared<methods::KnormScorer>(), {});
  const DecodingCell bad_cam{&merging, cam.policy};
  // A scorer that throws while decoding: its CAM cell fails alone (the guard's CamScoreSource).
  struct ThrowingScorer final : methods::Scorer {
    void score(const methods::LayerCapture&, const methods::SelectionContext&,
               std::span<float>) const override {
      throw std::invalid_argument("scorer refuses");
    }
    std::string name() const override { return "throwing"; }
  };
  const methods::ScorerMethod throwing(std::make_shared<ThrowingScorer>());
  const DecodingCell throwing_cam{&throwing, cam.policy};
  const std::vector<CellSpec> cells = {
      {nullptr, {}, Protocol::query_agnostic, 1, nullptr},
      {nullptr, {}, Protocol::query_agnostic, 2, &cam},
      {&methods.snapkv, {.compression = 0.5}, Protocol::query_agnostic, 3, &cam},
      {nullptr, {}, Protocol::query_agnostic, 4, &methods.knorm_decoding},
      {nullptr, {}, Protocol::query_agnostic, 5, &bad_cam},
      {nullptr, {}, Protocol::query_agnostic, 6, &throwing_cam},
  };
  for (const auto& [family, dtype] :
       std::vector<std::pair<std::string, std::string>>{{"llama", "f32"}, {"llama", "bf16"}}) {
    const model::ModelWeights weights = load_tiny_model(family, dtype);
    CpuModel model(weights, AttentionBackend::sdpa);
    const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
    const UnitRunOptions options = decoding_test_options(kNewTokens);
    const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
    const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
    ASSERT_EQ(fan_out.cells.size(), cells.size());
    std::vector<std::int32_t> prompt = tokens.context;
    prompt.insert(prompt.end(), tokens.question.begin(), tokens.question.end());
    for (std::size_t i = 0; i + 2 < cells.size(); ++i) {
      const std::string where = family + " " + dtype + ": cell " + std::to_string(i) + " (" +
                                describe_cell(cells[i]) + ")";
      const CellResult& cell = fan_out.cells[i];
      expect_decoding_fields(cells[i], cell, where);
      expect_same_decode(cell, naive.cells[i], where + " (vs naive)");
      if (cells[i].decoding == nullptr) continue;
      std::vector<std::int32_t> rest(prompt.begin() + cell.boundary, prompt.end());
      rest.insert(rest.end(), tokens.suffix.begin(), tokens.suffix.end());
      expect_equals_direct(cell, direct_compressing(model, cells[i], cell, prompt, rest, options),
                           where + " (vs generate_greedy_compressing)");
    }
    // CAM keeps one selection for all heads and merges values: not plain DecodingPress(KNorm).
    EXPECT_NE(fan_out.cells[1].generated, fan_out.cells[3].generated) << family << " " << dtype;
    for (const UnitResult* result : {&fan_out, &naive}) {
      EXPECT_EQ(result->cells[4].status, CellStatus::failed);
      EXPECT_NE(result->cells[4].error.find("CAM (merge_budget 3) needs a plain scorer"),
                std::string::npos)
          << result->cells[4].error;
      EXPECT_EQ(result->cells[5].status, CellStatus::failed);
      EXPECT_NE(result->cells[5].error.find("method throwing failed: scorer refuses"),
                std::string::npos)
          << result->cells[5].error;
      for (std::size_t i = 0; i < 4; ++i)
        expect_same_decode(result->cells[i], fan_out.cells[i], "cell " + std::to_string(i));
    }
  }
}

// CompressionRatioDecodingPress (DecodingPolicy::target_compression_ratio) through the unit
// runner: on a full-KV cell, after a SnapKV prefill and beside a fixed-target cell, the fan-out
// equals the naive route and the direct call; every interval evicts (the target grows with the
// tokens seen, 61 + step, and the cache is always above it), and the ratio cell ends with another
// cache than the fixed-target cell of the same method; an out-of-range ratio is refused.
TEST(DecodingFanOut, RatioCellsEqualNaiveAndTheDirectCall) {
  const DecodingMethods methods;
  const DecodingCell ratio{&methods.knorm,
                           {.compression_interval = 4,
                            .hidden_states_buffer_size = 256,
                            .target_compression_ratio = 0.5}};
  const std::vector<CellSpec> cells = {
      {nullptr, {}, Protocol::query_agnostic, 1, &ratio},
      {&methods.snapkv, {.compression = 0.5}, Protocol::query_agnostic, 2, &ratio},
      {nullptr, {}, Protocol::query_agnostic, 3, &methods.knorm_decoding},
      {nullptr, {}, Protocol::query_agnostic, 4, nullptr},
  };
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
  const UnitRunOptions options = decoding_test_options(kNewTokens);
  const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
  const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
  const UnitResult one_by_one =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, 1));
  std::vector<std::int32_t> prompt = tokens.context;
  prompt.insert(prompt.end(), tokens.question.begin(), tokens.question.end());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string where = "cell " + std::to_string(i) + " (" + describe_cell(cells[i]) + ")";
    const CellResult& cell = fan_out.cells[i];
    if (cells[i].decoding != &ratio) {
      expect_decoding_fields(cells[i], cell, where);
    } else {  // every interval evicts; the target grows, so the cache may end as large as its peak
      ASSERT_EQ(cell.status, CellStatus::ok) << where << ": " << cell.error;
      EXPECT_EQ(cell.decode_compressions, (kNewTokens - 1) / 4) << where;
      EXPECT_LE(cell.final_kv_bytes, cell.peak_kv_bytes) << where;
      EXPECT_TRUE(std::isfinite(cell.compression_seconds)) << where;
    }
    expect_same_decode(cell, naive.cells[i], where + " (vs naive)");
    expect_same_decode(cell, one_by_one.cells[i], where + " (vs batches of 1)");
    if (cells[i].decoding == nullptr) continue;
    std::vector<std::int32_t> rest(prompt.begin() + cell.boundary, prompt.end());
    rest.insert(rest.end(), tokens.suffix.begin(), tokens.suffix.end());
    expect_equals_direct(cell, direct_compressing(model, cells[i], cell, prompt, rest, options),
                         where + " (vs generate_greedy_compressing)");
  }
  // Last compression at step 16: T = 61 + 16 tokens seen, target int(77 / 2) = 38, then 3 more
  // steps: 41 entries per (layer, KV head) in both ratio cells; the fixed target keeps 24 + 3.
  // The full-KV ratio cell peaks at 61 + 4 entries before its first compression; the SnapKV one
  // at 24 + 13 + 4 = 41, what it ends with.
  EXPECT_EQ(fan_out.cells[0].final_kv_bytes, fan_out.cells[1].final_kv_bytes);
  EXPECT_EQ(fan_out.cells[0].final_kv_bytes * 27, fan_out.cells[2].final_kv_bytes * 41);
  EXPECT_EQ(fan_out.cells[0].peak_kv_bytes * 41, fan_out.cells[0].final_kv_bytes * 65);
  EXPECT_EQ(fan_out.cells[1].peak_kv_bytes, fan_out.cells[1].final_kv_bytes);

  const DecodingCell bad_ratio{&methods.knorm, {.target_compression_ratio = 1.0}};
  const std::vector<CellSpec> bad = {{nullptr, {}, Protocol::query_agnostic, 1, &bad_ratio}};
  try {
    (void)run_unit(model, weights, tokens, bad, options);
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("target_compression_ratio must be in [0, 1)"),
              std::string::npos)
        << e.what();
  }
}

TEST(DecodingFanOut, AnEngineWithoutObservedStepsFailsOnlyTheDecodingCells) {
  const DecodingMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  testing::CoreOnlyEngine engine(model);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
  const UnitResult reference =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens));
  for (auto* route : {&run_unit, &run_unit_naive}) {
    const UnitResult result =
        (*route)(engine, weights, tokens, cells, decoding_test_options(kNewTokens));
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string where = "cell " + std::to_string(i);
      if (cells[i].decoding == nullptr) {
        expect_same_decode(result.cells[i], reference.cells[i], where);
        continue;
      }
      EXPECT_EQ(result.cells[i].status, CellStatus::failed) << where;
      EXPECT_EQ(result.cells[i].error.rfind("decode-time compression failed: ", 0), 0u)
          << result.cells[i].error;
      EXPECT_NE(result.cells[i].error.find("--device cpu"), std::string::npos)
          << result.cells[i].error;
    }
  }
}

TEST(DecodingFanOut, InvalidSettingsAreRefusedNamingTheCell) {
  const DecodingMethods methods;
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
  const DecodingCell no_method{nullptr, {}};
  const DecodingCell zero_interval{&methods.knorm, {.compression_interval = 0}};
  for (const auto& [setting, expected] : std::vector<std::pair<const DecodingCell*, std::string>>{
           {&no_method, "cell 1's decoding setting has no method"},
           {&zero_interval, "cell 1: decoding: compression_interval must be >= 1, got 0"}}) {
    const std::vector<CellSpec> cells = {{nullptr, {}, Protocol::query_agnostic, 1, nullptr},
                                         {nullptr, {}, Protocol::query_agnostic, 2, setting}};
    for (auto* route : {&run_unit, &run_unit_naive}) {
      try {
        (void)(*route)(model, weights, tokens, cells, decoding_test_options(kNewTokens));
        ADD_FAILURE() << "expected std::invalid_argument: " << expected;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace kvaudit::unit
