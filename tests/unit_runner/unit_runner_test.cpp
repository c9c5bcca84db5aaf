// Tests of the unit runner on the tiny golden Llama (f32 and bf16, eager and sdpa): the fan-out
// route (one prefill, capture, per-cell eviction, batched decode) equals the naive route (one
// prefill per cell) — identical kept sets and greedy outputs — for test-local methods covering
// every captured item, ragged budgets, both protocols and several compressions; decoding in
// smaller batches changes nothing; kept counts, bytes and retention are right; keeping everything
// equals an uncompressed prefill of the whole prompt; failing methods become failed cells; bad
// inputs are rejected.
#include "runners/unit/unit_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/argmax.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/greedy_decoding.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::random_tokens;
using testing::TestScore;

bool same_kept_sets(const CellResult& a, const CellResult& b) {
  if (a.selection.has_value() != b.selection.has_value()) return false;
  return !a.selection || a.selection->kept == b.selection->kept;
}

struct TinyUnit {
  UnitTokens tokens;
  explicit TinyUnit(int vocab, std::uint32_t seed, int context = 72, int question = 14) {
    tokens.context = random_tokens(context, vocab, seed);
    tokens.question = random_tokens(question, vocab, seed + 100);
    tokens.suffix = random_tokens(5, vocab, seed + 200);
  }
};

std::vector<std::unique_ptr<methods::Method>> test_methods() {
  std::vector<std::unique_ptr<methods::Method>> all;
  all.push_back(testing::make_top_k_method(TestScore::key_norm));
  all.push_back(testing::make_top_k_method(TestScore::window_attention));
  all.push_back(testing::make_top_k_method(TestScore::window_attention, /*layer_wide=*/true));
  all.push_back(testing::make_top_k_method(TestScore::column_sums));
  all.push_back(testing::make_top_k_method(TestScore::query_moments));
  all.push_back(testing::make_keep_alternate_method());
  return all;
}

// Full-KV cells for both protocols, then every method × compression × protocol.
std::vector<CellSpec> grid(const std::vector<std::unique_ptr<methods::Method>>& all,
                           std::vector<double> compressions) {
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
  }
  for (const auto& method : all)
    for (double cr : compressions)
      for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  return cells;
}

UnitRunOptions decode(int max_new_tokens, std::vector<std::int32_t> stop = {}) {
  UnitRunOptions options;
  options.decode.max_new_tokens = max_new_tokens;
  options.decode.stop_token_ids = std::move(stop);
  options.seed = 42;
  return options;
}

TEST(UnitRunnerTest, FanOutEqualsNaiveOnTheTinyModels) {
  const auto all = test_methods();
  const std::vector<CellSpec> cells = grid(all, {0.25, 0.5, 0.9});
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
      CpuModel model(weights, backend);
      for (std::uint32_t seed : {1u, 2u}) {
        const TinyUnit unit(model.config().vocab_size, seed);
        const std::string where = dtype +
                                  (backend == AttentionBackend::eager ? " eager" : " sdpa") +
                                  " unit " + std::to_string(seed);
        const UnitResult result =
            expect_fan_out_equals_naive(model, weights, unit.tokens, cells, decode(10), where);
        EXPECT_EQ(result.context_end, 72);
        EXPECT_EQ(result.question_end, 86);
        for (std::size_t i = 0; i < cells.size(); ++i) {
          const CellResult& cell = result.cells[i];
          ASSERT_EQ(cell.status, CellStatus::ok) << where << " " << cell.error;
          EXPECT_EQ(cell.generated.size(), 10u) << where;
          EXPECT_EQ(cell.boundary, cells[i].protocol == Protocol::query_agnostic ? 72 : 86);
          EXPECT_EQ(cell.candidate_entries, cell.boundary * 2 * 2);  // 2 layers, 2 KV heads
          // The tiny models' cache counts 4 bytes (f32) or 2 (bf16) per element.
          EXPECT_EQ(cell.kept_bytes, cell.kept_entries * 2 * 16 * (dtype == "f32" ? 4 : 2));
          EXPECT_DOUBLE_EQ(
              cell.realised_retention,
              static_cast<double>(cell.kept_entries) / static_cast<double>(cell.candidate_entries));
          if (cells[i].method == nullptr) {
            EXPECT_EQ(cell.realised_retention, 1.0);
            EXPECT_FALSE(cell.selection.has_value());
            continue;
          }
          ASSERT_TRUE(cell.selection.has_value());
          std::int64_t entries = 0;
          for (const auto& layer : cell.selection->kept)
            for (const auto& head : layer) {
              entries += static_cast<std::int64_t>(head.size());
              for (std::int32_t p : head) EXPECT_LT(p, cell.boundary);  // candidates only
            }
          EXPECT_EQ(entries, cell.kept_entries);
        }
        // Per-head top-k keeps floor(L·(1−cr)) per head: retention tracks the budget.
        const CellResult& knorm_half_aware = result.cells[2 + 2 * 3 * 0 + 2 * 1 + 1];
        EXPECT_EQ(knorm_half_aware.kept_entries, 43 * 2 * 2);  // floor(86·0.5) = 43
      }
    }
  }
}

TEST(UnitRunnerTest, DecodingInSmallerBatchesChangesNothing) {
  const auto all = test_methods();
  const std::vector<CellSpec> cells = grid(all, {0.5});
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  CpuModel model(weights, AttentionBackend::eager);
  const TinyUnit unit(model.config().vocab_size, 7);
  UnitRunOptions options = decode(8);
  options.keep_selections = true;
  const UnitResult together = run_unit(model, weights, unit.tokens, cells, options);
  options.max_batch_cells = 3;
  const UnitResult in_threes = run_unit(model, weights, unit.tokens, cells, options);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(together.cells[i].generated, in_threes.cells[i].generated) << i;
    EXPECT_TRUE(same_kept_sets(together.cells[i], in_threes.cells[i])) << i;
  }
}

TEST(UnitRunnerTest, KeepingEverythingEqualsAnUncompressedPrefillOfTheWholePrompt) {
  const auto keep_all = testing::make_keep_all_method();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const TinyUnit unit(model.config().vocab_size, 9);
  std::vector<std::int32_t> whole = unit.tokens.context;
  whole.insert(whole.end(), unit.tokens.question.begin(), unit.tokens.question.end());
  whole.insert(whole.end(), unit.tokens.suffix.begin(), unit.tokens.suffix.end());
  cpu::SequenceState state = model.new_sequence();
  const LogitMatrix last = model.prefill(state, whole, LogitRows::last);
  const std::vector<std::int32_t> expected =
      unit::generate_greedy(model, state, last.row(0), {.max_new_tokens = 12, .eos_token_ids = {}})
          .tokens;
  const std::vector<CellSpec> cells = {
      {keep_all.get(), {}, Protocol::query_agnostic, 1},
      {keep_all.get(), {}, Protocol::query_aware, 2},
      {nullptr, {}, Protocol::query_agnostic, 3},
  };
  const UnitResult result = run_unit(model, weights, unit.tokens, cells, decode(12));
  for (const CellResult& cell : result.cells) {
    ASSERT_EQ(cell.status, CellStatus::ok) << cell.error;
    EXPECT_EQ(cell.generated, expected);
    EXPECT_EQ(cell.realised_retention, 1.0);
  }
}

TEST(UnitRunnerTest, StopTokensEndEachCellOnItsOwn) {
  const auto all = test_methods();
  const std::vector<CellSpec> cells = grid(all, {0.5});
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  const TinyUnit unit(model.config().vocab_size, 11);
  // Stop on the third token the full-KV agnostic cell produces when running free.
  const UnitResult free_run = run_unit(model, weights, unit.tokens, cells, decode(10));
  const std::int32_t stop = free_run.cells[0].generated[2];
  const UnitResult stopped =
      expect_fan_out_equals_naive(model, weights, unit.tokens, cells, decode(10, {stop}), "stop");
  EXPECT_TRUE(stopped.cells[0].stopped_on_stop_token);
  EXPECT_LE(stopped.cells[0].generated.size(), 3u);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& g = stopped.cells[i].generated;
    const auto& f = free_run.cells[i].generated;
    // A prefix of the free run, cut right after the first stop id.
    ASSERT_LE(g.size(), f.size());
    EXPECT_TRUE(std::equal(g.begin(), g.end(), f.begin())) << i;
    EXPECT_EQ(stopped.cells[i].stopped_on_stop_token, !g.empty() && g.back() == stop) << i;
  }
}

TEST(UnitRunnerTest, AFailingMethodFailsOnlyItsCell) {
  const auto good = testing::make_top_k_method(TestScore::window_attention);
  const auto throwing = testing::make_throwing_method();
  const auto out_of_range = testing::make_out_of_range_method();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const TinyUnit unit(model.config().vocab_size, 13);
  const std::vector<CellSpec> cells = {
      {good.get(), {.compression = 0.5}, Protocol::query_agnostic, 1},
      {throwing.get(), {.compression = 0.5}, Protocol::query_agnostic, 2},
      {out_of_range.get(), {.compression = 0.5}, Protocol::query_aware, 3},
      {nullptr, {}, Protocol::query_aware, 4},
  };
  const UnitResult result =
      expect_fan_out_equals_naive(model, weights, unit.tokens, cells, decode(6), "failures");
  EXPECT_EQ(result.cells[0].status, CellStatus::ok);
  EXPECT_EQ(result.cells[3].status, CellStatus::ok);
  EXPECT_EQ(result.cells[0].generated.size(), 6u);
  EXPECT_EQ(result.cells[1].status, CellStatus::failed);
  EXPECT_NE(result.cells[1].error.find("test_throwing"), std::string::npos);
  EXPECT_NE(result.cells[1].error.find("always refuses"), std::string::npos);
  EXPECT_TRUE(result.cells[1].generated.empty());
  EXPECT_EQ(result.cells[2].status, CellStatus::failed);
  EXPECT_NE(result.cells[2].error.find("invalid selection"), std::string::npos)
      << result.cells[2].error;
  EXPECT_NE(result.cells[2].error.find("not held"), std::string::npos) << result.cells[2].error;
}

TEST(UnitRunnerTest, RejectsBadUnits) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  const model::ModelWeights other = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const TinyUnit unit(model.config().vocab_size, 15);
  const std::vector<CellSpec> cells = {{nullptr, {}, Protocol::query_aware, 1}};
  for (auto* route : {&run_unit, &run_unit_naive}) {
    EXPECT_THROW(route(model, other, unit.tokens, cells, decode(2)), std::invalid_argument);
    UnitTokens no_suffix = unit.tokens;
    no_suffix.suffix.clear();
    EXPECT_THROW(route(model, weights, no_suffix, cells, decode(2)), std::invalid_argument);
    UnitTokens no_context = unit.tokens;
    no_context.context.clear();
    EXPECT_THROW(route(model, weights, no_context, cells, decode(2)), std::invalid_argument);
    UnitTokens bad_id = unit.tokens;
    bad_id.suffix.back() = 300;
    try {
      route(model, weights, bad_id, cells, decode(2));
      ADD_FAILURE() << "token 300 accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("suffix token 4"), std::string::npos)
          << error.what();
    }
    EXPECT_THROW(route(model, weights, unit.tokens, cells, decode(-1)), std::invalid_argument);
  }
  // An empty question is allowed: both protocols then compress the same prefix.
  const auto method = testing::make_top_k_method(TestScore::column_sums);
  UnitTokens no_question = unit.tokens;
  no_question.question.clear();
  const std::vector<CellSpec> both = {
      {method.get(), {.compression = 0.5}, Protocol::query_agnostic, 1},
      {method.get(), {.compression = 0.5}, Protocol::query_aware, 1}};
  const UnitResult result =
      expect_fan_out_equals_naive(model, weights, no_question, both, decode(4), "empty question");
  EXPECT_EQ(result.cells[0].generated, result.cells[1].generated);
  EXPECT_TRUE(same_kept_sets(result.cells[0], result.cells[1]));
}

}  // namespace
}  // namespace kvaudit::unit
