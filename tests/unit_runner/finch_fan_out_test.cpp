// finch in the unit runner (methods/finch.h; runners/unit/unit_runner.cpp): the runner hands the
// method the question's length (SelectionContext::question_tokens) and captures enough window rows
// for it (Method::window_rows_needed), and re-rotates the kept keys when rerotate_keys is set
// (evict_cell → SequenceCache::rerotate_kept_keys). On the tiny Llama (f32 and bf16): the fan-out
// gives what the naive route gives; under query-aware every question position is kept (the
// question is the window, scored max + 1, and the budget holds it) while the fallback window (4)
// is smaller than the question (10); with and without rerotate_keys the kept sets are equal and
// some greedy answer differs (the re-rotation happened).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "methods/finch.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::random_tokens;

// As make_method builds it: the runner reads rerotate_keys from the recorded parameters.
std::unique_ptr<methods::Method> finch(bool rerotate_keys) {
  const methods::FinchParams params{.window = 4, .rerotate_keys = rerotate_keys};
  auto method = std::make_unique<methods::FinchMethod>(params);
  method->set_parameters(params);
  return method;
}

TEST(FinchFanOut, QuestionIsTheWindowAndReRotationChangesAnswers) {
  const auto rotating = finch(true);
  const auto plain = finch(false);
  constexpr int kContext = 48, kQuestion = 10;
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (const methods::Method* method : {rotating.get(), plain.get()})
      for (double cr : {0.25, 0.75})
        cells.push_back({method, {.compression = cr}, protocol, key++});
  }
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  options.keep_selections = true;
  int answers_differ = 0;
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    cpu::CpuModel model(weights, AttentionBackend::sdpa);
    UnitTokens tokens;
    tokens.context = random_tokens(kContext, model.config().vocab_size, 31);
    tokens.question = random_tokens(kQuestion, model.config().vocab_size, 32);
    tokens.suffix = random_tokens(4, model.config().vocab_size, 33);
    const UnitResult result =
        expect_fan_out_equals_naive(model, weights, tokens, cells, options, dtype);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      ASSERT_EQ(result.cells[i].status, CellStatus::ok)
          << dtype << " cell " << i << ": " << result.cells[i].error;
      if (cells[i].method != rotating.get()) continue;
      // The same ratio without the re-rotation is two cells further on.
      const std::size_t twin = i + 2;
      ASSERT_EQ(cells[twin].method, plain.get());
      ASSERT_EQ(cells[twin].budget.compression, cells[i].budget.compression);
      const auto& kept = result.cells[i].selection->kept;
      EXPECT_EQ(kept, result.cells[twin].selection->kept) << dtype << " cell " << i;
      if (result.cells[i].generated != result.cells[twin].generated) ++answers_differ;
      if (cells[i].protocol != Protocol::query_aware || cells[i].budget.compression > 0.5) continue;
      // cr 0.25: n_kept = floor(58·0.75) = 43 ≥ 10, so the whole question (the window) stays.
      for (const auto& layer : kept)
        for (const auto& head : layer)
          for (int p = kContext; p < kContext + kQuestion; ++p)
            EXPECT_TRUE(std::binary_search(head.begin(), head.end(), p))
                << dtype << " question position " << p << " evicted";
    }
  }
  EXPECT_GT(answers_differ, 0) << "rerotate_keys never changed a greedy answer";
}

}  // namespace
}  // namespace kvaudit::unit
