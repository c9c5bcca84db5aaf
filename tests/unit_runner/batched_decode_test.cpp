// A unit whose cells decode in one batch gives each cell the greedy ids it gets decoded alone: the
// case that diverged before linear() was made row-invariant (runners/cpu/linear.cpp §Row
// invariance) — plain streaming_llm on the tiny bf16 Llama, token seeds 31–33, where the cr 0.75
// query-agnostic cell's 6th token sat at a near-tie that OpenBLAS's small-matrix kernel (M = 1,
// naive route) and its blocked kernel (M = 4, fan-out) broke differently.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

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

TEST(BatchedDecode, CellsDecodedTogetherGiveTheIdsEachGetsAlone) {
  const auto streaming = std::make_shared<methods::StreamingLlmScorer>(4);
  const methods::ScorerMethod method(streaming);
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (double cr : {0.25, 0.75}) cells.push_back({&method, {.compression = cr}, protocol, key++});
  }
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  UnitTokens tokens;
  tokens.context = random_tokens(48, model.config().vocab_size, 31);
  tokens.question = random_tokens(10, model.config().vocab_size, 32);
  tokens.suffix = random_tokens(4, model.config().vocab_size, 33);
  const UnitResult result =
      expect_fan_out_equals_naive(model, weights, tokens, cells, options, "bf16");
  for (const CellResult& cell : result.cells) EXPECT_EQ(cell.generated.size(), 8u);
}

}  // namespace
}  // namespace kvaudit::unit
