// think in the unit runner (runners/unit/unit_runner.cpp evict_cell →
// SequenceCache::zero_key_channels; methods/think.h): its cells give the same kept sets, kept
// bytes and greedy outputs through the fan-out as through the naive route (tiny Llama, f32 and
// bf16, both protocols), keep every candidate position, count the pruned channels as freed
// (kept_bytes = entries · (2·head_dim − pruned) · bytes per element), and change what the model
// answers for some cell; composed(snapkv, think) keeps snapkv's positions and frees the channels
// on top. A cache that cannot prune key channels (the CUDA engine's) refuses.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "methods/composed.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "methods/think.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::random_tokens;

TEST(ThinkFanOut, FanOutEqualsNaiveKeepsEveryPositionAndFreesThePrunedChannels) {
  const methods::ThinkParams half{.key_channel_compression_ratio = 0.5, .window_size = 32};
  const methods::ThinkMethod think(half);
  const auto snap = std::make_shared<methods::SnapKvScorer>(methods::SnapKvParams{.window = 16});
  const methods::ScorerMethod snap_alone(snap);
  const methods::ComposedMethod composed({snap}, {0.5, 0.25},
                                         std::make_shared<const methods::ThinkMethod>(half));
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    cells.push_back({&think, {.compression = 0.25}, protocol, key++});
    cells.push_back({&snap_alone, {.compression = 0.5}, protocol, key++});
    cells.push_back({&composed, {.compression = 0.625}, protocol, key++});
  }
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  int answers_differ = 0;
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    cpu::CpuModel model(weights, AttentionBackend::sdpa);
    const std::int64_t d = model.config().head_dim;
    const std::int64_t pruned = d / 2;  // int(head_dim · 0.5)
    const std::int64_t bytes = dtype == "bf16" ? 2 : 4;
    UnitTokens tokens;
    tokens.context = random_tokens(48, model.config().vocab_size, 31);
    tokens.question = random_tokens(10, model.config().vocab_size, 32);
    tokens.suffix = random_tokens(4, model.config().vocab_size, 33);
    const UnitResult result =
        expect_fan_out_equals_naive(model, weights, tokens, cells, options, dtype);
    ASSERT_EQ(result.cells.size(), cells.size());
    for (std::size_t i = 0; i < cells.size(); i += 4) {  // full, think, snapkv, composed
      const auto& full = result.cells[i];
      const auto& pruning = result.cells[i + 1];
      const auto& snapped = result.cells[i + 2];
      const auto& both = result.cells[i + 3];
      for (const auto* cell : {&full, &pruning, &snapped, &both})
        ASSERT_EQ(cell->status, CellStatus::ok) << dtype << " cell " << i << ": " << cell->error;
      // think keeps every candidate; its bytes lose the pruned channels of every entry.
      EXPECT_EQ(pruning.kept_entries, pruning.candidate_entries) << dtype;
      EXPECT_EQ(pruning.kept_bytes, pruning.kept_entries * (2 * d - pruned) * bytes) << dtype;
      ASSERT_TRUE(pruning.selection.has_value());
      EXPECT_FALSE(pruning.selection->zeroed_key_channels.empty());
      // composed: snapkv's positions, and the channels freed on top.
      ASSERT_TRUE(both.selection.has_value() && snapped.selection.has_value());
      EXPECT_EQ(both.selection->kept, snapped.selection->kept) << dtype;
      EXPECT_EQ(snapped.kept_bytes, snapped.kept_entries * 2 * d * bytes);
      EXPECT_EQ(both.kept_bytes, both.kept_entries * (2 * d - pruned) * bytes) << dtype;
      if (pruning.generated != full.generated) ++answers_differ;
      if (both.generated != snapped.generated) ++answers_differ;
    }
  }
  EXPECT_GT(answers_differ, 0) << "zeroing key channels never changed a greedy answer";
}

// The interface's default (the CUDA engine's cache): pruning key channels is refused, so the
// runner fails a think cell instead of running it unpruned.
TEST(ThinkFanOut, ACacheWithoutChannelPruningRefuses) {
  class PlainCache : public SequenceCache {
   public:
    int num_layers() const override { return 1; }
    int num_kv_heads() const override { return 1; }
    std::int64_t original_length() const override { return 0; }
    std::size_t kept_entries() const override { return 0; }
    std::size_t kept_bytes() const override { return 0; }
    std::unique_ptr<SequenceCache> fork() const override { return nullptr; }
    void truncate(std::int64_t) override {}
    void retain(const methods::Selection&) override {}
  };
  PlainCache cache;
  methods::Selection selection;
  selection.zeroed_key_channels = {{{0}}};
  EXPECT_THROW(cache.zero_key_channels(selection), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::unit
