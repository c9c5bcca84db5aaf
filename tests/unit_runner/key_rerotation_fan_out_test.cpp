// key_rerotation in the unit runner (runners/unit/unit_runner.cpp evict_cell →
// SequenceCache::rerotate_kept_keys; methods/key_rerotation.h): its cells give the same kept sets,
// digests and greedy outputs through the fan-out as through the naive route (tiny Llama, f32 and
// bf16), keep exactly the inner press's positions, and do change what the model sees: the cache
// after a re-rotation holds other keys than the inner press's cache, and the greedy answers differ
// for some cell. An engine whose cache cannot re-rotate fails exactly those cells, with its reason.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "methods/key_rerotation.h"
#include "methods/knorm.h"
#include "methods/scorer_method.h"
#include "methods/streaming_llm.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::random_tokens;

// A method as make_method builds it: the runner recognises key_rerotation by its parameters.
std::unique_ptr<methods::Method> rerotating(std::shared_ptr<const methods::Scorer> scorer) {
  auto method = std::make_unique<methods::KeyRerotationMethod>(std::move(scorer));
  method->set_parameters(methods::KeyRerotationParams{.scorer = "inner"});
  return method;
}

TEST(KeyRerotationFanOut, FanOutEqualsNaiveKeepsTheInnerSetAndChangesTheCache) {
  const auto streaming = std::make_shared<methods::StreamingLlmScorer>(4);
  const auto knorm = std::make_shared<methods::KnormScorer>();
  std::vector<std::unique_ptr<methods::Method>> all;
  all.push_back(rerotating(streaming));
  all.push_back(std::make_unique<methods::ScorerMethod>(streaming));
  all.push_back(rerotating(knorm));
  all.push_back(std::make_unique<methods::ScorerMethod>(knorm));
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (const auto& method : all)
      for (double cr : {0.25, 0.75})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  }
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  options.keep_selections = true;
  int answers_differ = 0;
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    cpu::CpuModel model(weights, AttentionBackend::sdpa);
    UnitTokens tokens;
    tokens.context = random_tokens(48, model.config().vocab_size, 21);
    tokens.question = random_tokens(10, model.config().vocab_size, 22);
    tokens.suffix = random_tokens(4, model.config().vocab_size, 23);
    const UnitResult result =
        expect_fan_out_equals_naive(model, weights, tokens, cells, options, dtype);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      ASSERT_EQ(result.cells[i].status, CellStatus::ok)
          << dtype << " cell " << i << ": " << result.cells[i].error;
      // Cells come in (rerotating, inner) pairs per scorer and ratio: same kept sets.
      if (cells[i].method == all[0].get() || cells[i].method == all[2].get()) {
        const std::size_t inner = i + 2;  // the next method of `all` at the same ratio
        ASSERT_EQ(cells[inner].budget.compression, cells[i].budget.compression);
        EXPECT_EQ(result.cells[i].selection->kept, result.cells[inner].selection->kept)
            << dtype << " cell " << i;
        EXPECT_EQ(result.cells[i].kept_entries, result.cells[inner].kept_entries);
        if (result.cells[i].generated != result.cells[inner].generated) ++answers_differ;
      }
    }
    // The cache itself: the same eviction with and without the re-rotation holds other keys
    // (all kept positions move but position 0's), at the same positions and original length.
    auto state = model.new_sequence();
    std::vector<std::int32_t> prompt = tokens.context;
    model.prefill(state, prompt, LogitRows::none, nullptr);
    auto plain = state.fork();
    auto rotated = state.fork();
    methods::Selection selection;
    for (int l = 0; l < state.num_layers(); ++l)
      selection.kept.emplace_back(static_cast<std::size_t>(state.num_kv_heads()),
                                  std::vector<std::int32_t>{0, 7, 20, 47});
    plain->retain(selection);
    rotated->retain(selection);
    rotated->rerotate_kept_keys(model.rope_inv_freq(), dtype == "bf16");
    const auto& a = dynamic_cast<cpu::SequenceState&>(*plain).kv_cache().head(1, 0);
    const auto& b = dynamic_cast<cpu::SequenceState&>(*rotated).kv_cache().head(1, 0);
    const std::size_t d = static_cast<std::size_t>(model.config().head_dim);
    EXPECT_TRUE(std::equal(a.positions.begin(), a.positions.end(), b.positions.begin()));
    EXPECT_TRUE(
        std::equal(a.keys.begin(), a.keys.begin() + static_cast<std::ptrdiff_t>(d), b.keys.begin()))
        << "position 0 stays at index 0";
    EXPECT_FALSE(std::equal(a.keys.begin() + static_cast<std::ptrdiff_t>(d), a.keys.end(),
                            b.keys.begin() + static_cast<std::ptrdiff_t>(d)))
        << "the other kept keys move";
    EXPECT_TRUE(std::equal(a.values.begin(), a.values.end(), b.values.begin()));
    EXPECT_EQ(plain->original_length(), rotated->original_length());
  }
  EXPECT_GT(answers_differ, 0) << "re-rotation never changed a greedy answer";
}

// The interface's default: a cache that cannot re-rotate (the CUDA engine's) refuses, so the
// runner fails the key_rerotation cell instead of running its inner press.
TEST(KeyRerotationFanOut, ACacheWithoutReRotationRefuses) {
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
  const std::vector<float> inv_freq = {1.0f};
  EXPECT_THROW(cache.rerotate_kept_keys(inv_freq, false), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::unit
