// Tests of greedy generation: torch.argmax tie/NaN rules, eos handling (eos included, as in HF
// generate), max_new_tokens, equivalence with a hand-written decode loop, batched == individual.
#include "runners/unit/greedy_decoding.h"

#include <gtest/gtest.h>

#include "base/argmax.h"
#include "runners/cpu/cpu_model.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tests/cpu_runtime/random_model.h"

namespace kvaudit::cpu {
namespace {

using unit::generate_greedy;
using unit::generate_greedy_batch;
using unit::GreedyOutput;
using testing::make_random_model;
using testing::random_tokens;
using testing::RandomModelSpec;

TEST(ArgmaxTokenTest, TiesGoToTheLowestIdAndNanWins) {
  EXPECT_EQ(argmax_token(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax_token(std::vector<float>{-5}), 0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(argmax_token(std::vector<float>{1, inf, inf}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax_token(std::vector<float>{1, 9, nan, nan}), 2);
  EXPECT_THROW(argmax_token(std::vector<float>{}), std::invalid_argument);
}

// A hand-written greedy loop over prefill/decode_step, the definition generate_greedy must match.
std::vector<std::int32_t> manual_greedy(CpuModel& model, std::span<const std::int32_t> prompt,
                                        int max_new, const std::vector<std::int32_t>& eos) {
  SequenceState state = model.new_sequence();
  LogitMatrix logits = model.prefill(state, prompt, LogitRows::last);
  std::vector<std::int32_t> out;
  while (true) {
    const std::int32_t token = argmax_token(logits.row(0));
    out.push_back(token);
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) break;
    if (static_cast<int>(out.size()) == max_new) break;
    SequenceState* batch[] = {&state};
    const std::int32_t next[] = {token};
    logits = model.decode_step(batch, next);
  }
  return out;
}

TEST(GreedyGenerationTest, MatchesAHandWrittenLoopAndStopsOnEosIncludingIt) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  CpuModel model(weights, AttentionBackend::sdpa);
  const std::vector<std::int32_t> prompt = random_tokens(9, spec.vocab_size, 60);
  const std::vector<std::int32_t> free_run = manual_greedy(model, prompt, 12, {});
  ASSERT_EQ(free_run.size(), 12u);

  SequenceState state = model.new_sequence();
  const LogitMatrix last = model.prefill(state, prompt, LogitRows::last);
  const GreedyOutput out =
      generate_greedy(model, state, last.row(0), {.max_new_tokens = 12, .eos_token_ids = {}});
  EXPECT_EQ(out.tokens, free_run);
  EXPECT_FALSE(out.stopped_on_eos);
  // The last produced token is not fed back: 9 prompt + 11 decoded tokens in the cache.
  EXPECT_EQ(state.original_length(), 9 + 11);

  // Declare the 4th generated token an eos id (with another id that never occurs): output stops
  // there and includes it.
  const std::vector<std::int32_t> eos = {free_run[3], spec.vocab_size + 5};
  std::size_t first = 0;
  while (free_run[first] != eos[0]) ++first;
  SequenceState again = model.new_sequence();
  const LogitMatrix last_again = model.prefill(again, prompt, LogitRows::last);
  const GreedyOutput stopped = generate_greedy(model, again, last_again.row(0),
                                               {.max_new_tokens = 12, .eos_token_ids = eos});
  EXPECT_TRUE(stopped.stopped_on_eos);
  EXPECT_EQ(stopped.tokens,
            std::vector<std::int32_t>(free_run.begin(), free_run.begin() + first + 1));
  EXPECT_EQ(stopped.tokens, manual_greedy(model, prompt, 12, eos));

  SequenceState untouched = model.new_sequence();
  const LogitMatrix l3 = model.prefill(untouched, prompt, LogitRows::last);
  EXPECT_TRUE(
      generate_greedy(model, untouched, l3.row(0), {.max_new_tokens = 0, .eos_token_ids = {}})
          .tokens.empty());
  EXPECT_EQ(untouched.original_length(), 9);
  EXPECT_THROW(
      generate_greedy(model, untouched, l3.row(0), {.max_new_tokens = -1, .eos_token_ids = {}}),
      std::invalid_argument);
}

TEST(GreedyGenerationTest, BatchedGreedyEqualsIndividualRunsEachStoppingOnItsOwn) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 5; ++i)
      prompts.push_back(random_tokens(6 + 3 * i, spec.vocab_size, 70 + i));
    // eos = the 3rd free-running token of sequence 0: it stops early; the others may run to the
    // end.
    const std::int32_t eos = manual_greedy(model, prompts[0], 10, {})[2];
    std::vector<SequenceState> states;
    LogitMatrix last;
    last.rows = 5;
    last.vocab = spec.vocab_size;
    for (const auto& p : prompts) {
      states.push_back(model.new_sequence());
      const LogitMatrix l = model.prefill(states.back(), p, LogitRows::last);
      last.values.insert(last.values.end(), l.values.begin(), l.values.end());
    }
    std::vector<unit::SequenceCache*> pointers;
    for (auto& s : states) pointers.push_back(&s);
    const std::vector<GreedyOutput> outputs = generate_greedy_batch(
        model, pointers, last, {.max_new_tokens = 10, .eos_token_ids = {eos}});
    ASSERT_EQ(outputs.size(), 5u);
    EXPECT_TRUE(outputs[0].stopped_on_eos);
    EXPECT_LE(outputs[0].tokens.size(), 3u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(outputs[i].tokens, manual_greedy(model, prompts[i], 10, {eos})) << "sequence " << i;
    }
    LogitMatrix wrong = last;
    wrong.rows = 4;
    EXPECT_THROW(
        generate_greedy_batch(model, pointers, wrong, {.max_new_tokens = 2, .eos_token_ids = {}}),
        std::invalid_argument);
  }
}

}  // namespace
}  // namespace kvaudit::cpu
