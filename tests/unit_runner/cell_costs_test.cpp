// Per-cell costs (runners/unit/cost_shares.h, CellResult's *_seconds, shared_costs and
// peak_kv_bytes): the apportioning rules on a hand-computed 3-cell toy, and on the tiny Llama that
// the fan-out gives every cell positive times whose shares add up to the unit's measured phases,
// flags exactly the shared steps, and reports the cache's peak bytes as the cache counts them;
// the naive route's costs are all the cell's own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "methods/kvzip.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::load_tiny_model;
using testing::random_tokens;

// Three cells A, B, C (indices 0, 1, 2).
TEST(CostShares, ThreeCellToyByHand) {
  // A prefill of 0.9 s shared by three cells: 0.3 s each.
  for (const double share : equal_shares(0.9, 3)) EXPECT_DOUBLE_EQ(share, 0.3);
  EXPECT_TRUE(equal_shares(1.0, 0).empty());
  // A batched feed of 1.2 s where A fed 1 token, B 2 and C 3: 1.2·(1, 2, 3)/6 = 0.2, 0.4, 0.6.
  const std::vector<std::size_t> tokens{1, 2, 3};
  const std::vector<double> feed = proportional_shares(1.2, tokens);
  EXPECT_DOUBLE_EQ(feed[0], 0.2);
  EXPECT_DOUBLE_EQ(feed[1], 0.4);
  EXPECT_DOUBLE_EQ(feed[2], 0.6);
  // No tokens at all: equal shares.
  const std::vector<std::size_t> none{0, 0, 0};
  for (const double share : proportional_shares(0.6, none)) EXPECT_DOUBLE_EQ(share, 0.2);
  // Decode: step 1 (0.3 s) decodes A, B, C → 0.1 each; step 2 (0.2 s) A, B → 0.1 each; step 3
  // (0.05 s) A alone. A = 0.1 + 0.1 + 0.05 = 0.25, B = 0.2, C = 0.1 (Σ 0.55).
  std::vector<double> decode(3, 0.0);
  add_step_share(decode, std::vector<std::size_t>{0, 1, 2}, 0.3);
  add_step_share(decode, std::vector<std::size_t>{0, 1}, 0.2);
  add_step_share(decode, std::vector<std::size_t>{0}, 0.05);
  add_step_share(decode, std::vector<std::size_t>{}, 1.0);  // nobody alive: nothing to share
  EXPECT_DOUBLE_EQ(decode[0], 0.25);
  EXPECT_DOUBLE_EQ(decode[1], 0.2);
  EXPECT_DOUBLE_EQ(decode[2], 0.1);
  // The batch's decode took 0.58 s in all: the 0.03 s outside the steps in equal shares (0.01).
  const std::vector<double> completed = complete_shares(0.58, decode);
  EXPECT_NEAR(completed[0], 0.26, 1e-12);
  EXPECT_NEAR(completed[1], 0.21, 1e-12);
  EXPECT_NEAR(completed[2], 0.11, 1e-12);
  EXPECT_NEAR(completed[0] + completed[1] + completed[2], 0.58, 1e-12);
}

UnitTokens tiny_unit(int vocab) {
  UnitTokens t;
  t.context = random_tokens(48, vocab, 21);
  t.question = random_tokens(10, vocab, 22);
  t.suffix = random_tokens(4, vocab, 23);
  t.pass_prompt.prefix_length = 3;
  t.pass_prompt.suffix = random_tokens(2, vocab, 24);
  t.pass_prompt.repeat_first = random_tokens(7, vocab, 25);
  t.pass_prompt.repeat_next = random_tokens(9, vocab, 26);
  return t;
}

double sum(const UnitResult& unit, double CellResult::*cost) {
  double total = 0;
  for (const CellResult& cell : unit.cells) {
    if (!std::isnan(cell.*cost)) total += cell.*cost;
  }
  return total;
}

class CellCosts : public ::testing::Test {
 protected:
  void SetUp() override {
    key_norm_ = testing::make_top_k_method(testing::TestScore::key_norm);
    methods::KvzipParams params;
    kvzip_ = std::make_unique<methods::KvzipMethod>(params);
    std::uint64_t key = 1;
    // Query-agnostic: full KV, key_norm at two budgets, kvzip at two budgets (one shared pass);
    // query-aware: key_norm at one budget (views of another boundary).
    cells_.push_back({nullptr, {}, Protocol::query_agnostic, key++});
    for (const double cr : {0.25, 0.75}) {
      cells_.push_back({key_norm_.get(), {.compression = cr}, Protocol::query_agnostic, key++});
    }
    for (const double cr : {0.25, 0.75}) {
      cells_.push_back({kvzip_.get(), {.compression = cr}, Protocol::query_agnostic, key++});
    }
    cells_.push_back({key_norm_.get(), {.compression = 0.5}, Protocol::query_aware, key++});
    options_.decode.max_new_tokens = 6;  // the tiny model has no stop ids: 6 tokens, 5 steps
    options_.seed = 3;
  }
  std::unique_ptr<methods::Method> key_norm_, kvzip_;
  std::vector<CellSpec> cells_;
  UnitRunOptions options_;
};

TEST_F(CellCosts, FanOutSharesArePositiveAndAddUpToTheUnitsPhases) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::eager);
  const UnitTokens tokens = tiny_unit(model.config().vocab_size);
  for (const int batch : {0, 2}) {  // all cells decoded together, or in batches of 2
    SCOPED_TRACE("max_batch_cells " + std::to_string(batch));
    options_.max_batch_cells = batch;
    const UnitResult unit = run_unit(model, weights, tokens, cells_, options_);
    ASSERT_GT(unit.threads, 0);
    const std::size_t entry_bytes = 2 * 16 * 4;  // K and V, head_dim 16, f32
    for (std::size_t i = 0; i < cells_.size(); ++i) {
      SCOPED_TRACE("cell " + std::to_string(i));
      const CellResult& cell = unit.cells[i];
      ASSERT_EQ(cell.status, CellStatus::ok) << cell.error;
      const bool evicting = cells_[i].method != nullptr;
      const bool has_pass = evicting && cells_[i].method->extra_pass() != nullptr;
      EXPECT_GT(cell.prefill_seconds, 0.0);
      EXPECT_GT(cell.evict_seconds, 0.0);
      EXPECT_GT(cell.feed_seconds, 0.0);
      EXPECT_GT(cell.decode_seconds, 0.0);
      if (evicting) {
        EXPECT_GT(cell.select_seconds, 0.0);
        EXPECT_GT(cell.capture_seconds, 0.0);
      } else {
        EXPECT_TRUE(std::isnan(cell.capture_seconds));
      }
      EXPECT_EQ(std::isnan(cell.extra_pass_seconds), !has_pass);
      if (has_pass) {
        EXPECT_GT(cell.extra_pass_seconds, 0.0);
      }
      // Shared: the prefill (6 cells), the feed and decode when batched with others, the capture
      // views of the query-agnostic boundary (4 evicting cells; the query-aware one is alone at its
      // boundary), the kvzip pass (2 cells).
      std::uint32_t want = kPrefillShare | kFeedShare | kDecodeShare;
      if (evicting && cells_[i].protocol == Protocol::query_agnostic) want |= kCaptureShare;
      if (has_pass) want |= kExtraPassShare;
      EXPECT_EQ(cell.shared_costs, want);
      // The cache after decoding: the kept entries plus, per layer (2) and KV head (2), the fed
      // tokens and the generated ones but the last.
      const std::size_t fed = (cells_[i].protocol == Protocol::query_agnostic ? 10 : 0) + 4;
      const std::size_t grown = (fed + cell.generated.size() - 1) * 2 * 2;
      EXPECT_EQ(cell.generated.size(), 6u);
      EXPECT_EQ(cell.kept_bytes, cell.kept_entries * static_cast<std::int64_t>(entry_bytes));
      EXPECT_EQ(cell.peak_kv_bytes,
                cell.kept_bytes + static_cast<std::int64_t>(grown * entry_bytes));
    }
    // Every shared phase is split without loss: Σ over cells = the unit's measured phase.
    const double tolerance = 1e-9;
    EXPECT_NEAR(sum(unit, &CellResult::prefill_seconds), unit.timings.prefill_seconds, tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::capture_seconds), unit.timings.capture_seconds, tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::extra_pass_seconds), unit.timings.extra_pass_seconds,
                tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::select_seconds), unit.timings.select_seconds, tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::evict_seconds), unit.timings.evict_seconds, tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::feed_seconds), unit.timings.feed_seconds, tolerance);
    EXPECT_NEAR(sum(unit, &CellResult::decode_seconds), unit.timings.decode_seconds, tolerance);
    EXPECT_GT(unit.timings.capture_seconds, 0.0);
    EXPECT_GT(unit.timings.extra_pass_seconds, 0.0);
    // The phases lie inside the route's wall time (selection and eviction overlap across threads,
    // so only the serial phases are compared).
    EXPECT_LE(unit.timings.prefill_seconds + unit.timings.capture_seconds +
                  unit.timings.extra_pass_seconds + unit.timings.feed_seconds +
                  unit.timings.decode_seconds,
              unit.timings.total_seconds);
    // The two kvzip cells shared one pass: equal shares.
    EXPECT_DOUBLE_EQ(unit.cells[3].extra_pass_seconds, unit.cells[4].extra_pass_seconds);
  }
}

TEST_F(CellCosts, TheNaiveRoutesCostsAreEachCellsOwn) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::eager);
  const UnitTokens tokens = tiny_unit(model.config().vocab_size);
  const UnitResult fan_out = run_unit(model, weights, tokens, cells_, options_);
  const UnitResult naive = run_unit_naive(model, weights, tokens, cells_, options_);
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    SCOPED_TRACE("cell " + std::to_string(i));
    const CellResult& cell = naive.cells[i];
    ASSERT_EQ(cell.status, CellStatus::ok) << cell.error;
    EXPECT_EQ(cell.shared_costs, 0u);
    EXPECT_GT(cell.prefill_seconds, 0.0);
    EXPECT_GT(cell.feed_seconds, 0.0);
    EXPECT_GT(cell.decode_seconds, 0.0);
    EXPECT_EQ(std::isnan(cell.capture_seconds), cells_[i].method == nullptr);
    // Same kept sets and outputs as the fan-out, so the same cache at its largest.
    EXPECT_EQ(cell.peak_kv_bytes, fan_out.cells[i].peak_kv_bytes);
  }
  EXPECT_NEAR(sum(naive, &CellResult::prefill_seconds), naive.timings.prefill_seconds, 1e-9);
  EXPECT_NEAR(sum(naive, &CellResult::decode_seconds), naive.timings.decode_seconds, 1e-9);
}

}  // namespace
}  // namespace kvaudit::unit
