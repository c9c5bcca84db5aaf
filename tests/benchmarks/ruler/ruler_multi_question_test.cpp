// RULER's multi-question form for the reuse protocol (suite/benchmarks/ruler/multi_question.h):
// the shared instance is niah_multiquery's byte for byte (the existing task is unchanged), every
// needle is in the context exactly once with its own question and answer, the wording is RULER's
// single-value niah wording, every question fits L, the form is a pure function of the seed, and a
// non-multiquery instance is refused. Tokenizer: the SentencePiece test model (spm_ruler).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/errors.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "suite/benchmarks/ruler/multi_question.h"
#include "suite/benchmarks/ruler/ruler_templates.h"

namespace kvaudit::benchmarks::ruler {
namespace {

const std::filesystem::path kSource = KVAUDIT_SOURCE_DIR;
const std::filesystem::path kSpm =
    kSource / "tests" / "benchmarks" / "ruler" / "golden" / "spm_ruler";

RulerConfig config_for(std::int64_t length, std::uint64_t seed = 42) {
  RulerConfig c;
  c.seed = seed;
  c.length = length;
  return c;
}

TEST(RulerMultiQuestion, OneQuestionPerNeedleOnTheUnchangedMultiqueryInstance) {
  const auto tok = model::load_tokenizer(kSpm);
  const PromptMeasurer m(*tok, model::ChatTemplateKind::none);
  RulerGenerator generator(config_for(2048), m);
  RulerGenerator plain(config_for(2048), m);  // the existing task, generated on its own
  for (std::int64_t index = 0; index < 3; ++index) {
    const RulerMultiQuestionInstance mq = generate_multi_question(generator, m, index);
    SCOPED_TRACE("instance " + std::to_string(index));
    EXPECT_EQ(mq.shared, plain.generate("niah_multiquery", index));
    ASSERT_EQ(mq.questions.size(), 4u);
    std::set<std::string> keys;
    std::set<std::size_t> offsets;
    std::vector<std::string> all_answers;
    for (std::size_t j = 0; j < mq.questions.size(); ++j) {
      const RulerQuestion& q = mq.questions[j];
      keys.insert(q.key);
      offsets.insert(q.needle_offset);
      ASSERT_EQ(q.answers.size(), 1u);
      all_answers.push_back(q.answers[0]);
      // The answer is a 7-digit number and its needle sits in the shared context.
      EXPECT_EQ(q.answers[0].size(), 7u);
      const std::string needle =
          "One of the special magic numbers for " + q.key + " is: " + q.answers[0] + ".";
      EXPECT_EQ(mq.shared.context.find(needle), q.needle_offset);
      EXPECT_EQ(mq.shared.context.rfind(needle), q.needle_offset);
      EXPECT_EQ(q.question, "What is the special magic number for " + q.key +
                                " mentioned in the provided text? ");
      EXPECT_EQ(q.answer_prefix,
                "The special magic number for " + q.key + " mentioned in the provided text is");
      // Measured after the shared context, and within L.
      const PromptTokens tokens = m.measure(mq.shared.context, q.question, q.answer_prefix);
      EXPECT_EQ(tokens.question, q.question_tokens);
      EXPECT_LE(mq.shared.context_tokens + q.question_tokens + mq.shared.max_new_tokens, 2048);
      EXPECT_LT(q.question_tokens, mq.shared.question_tokens);  // shorter than the combined one
      const RulerInstance single = mq.question_instance(j);
      EXPECT_EQ(single.full_text(), mq.shared.context + q.question + q.answer_prefix);
      EXPECT_EQ(single.answers, q.answers);
      EXPECT_EQ(single.context_tokens, mq.shared.context_tokens);
    }
    EXPECT_EQ(keys.size(), 4u);     // four distinct keys
    EXPECT_EQ(offsets.size(), 4u);  // at four distinct depths
    EXPECT_EQ(all_answers, mq.shared.answers);
    // The needles lie inside the haystack, not in the instruction before it.
    const std::size_t haystack_start = mq.shared.context.find('\n');
    for (const std::size_t offset : offsets) {
      EXPECT_GT(offset, haystack_start);
      EXPECT_LT(offset, mq.shared.context.size());
    }
  }
}

TEST(RulerMultiQuestion, WordingIsRulersSingleValueNiahQuestion) {
  // niah_single_2 (one key, one value, essay haystack) words its question with the singularised
  // template; the multi-question form must use the same sentence with its own key.
  const auto tok = model::load_tokenizer(kSpm);
  const PromptMeasurer m(*tok, model::ChatTemplateKind::none);
  RulerGenerator generator(config_for(2048), m);
  const RulerInstance single = generator.generate("niah_single_2", 0);
  const std::string start = "What is the special magic number for ";
  const std::string end = " mentioned in the provided text? ";
  ASSERT_EQ(single.question.rfind(start, 0), 0u) << single.question;
  ASSERT_GE(single.question.size(), start.size() + end.size());
  ASSERT_EQ(single.question.substr(single.question.size() - end.size()), end) << single.question;
  const std::string key =
      single.question.substr(start.size(), single.question.size() - start.size() - end.size());
  EXPECT_EQ(single.answer_prefix,
            "The special magic number for " + key + " mentioned in the provided text is");
}

TEST(RulerMultiQuestion, DeterministicFromTheSeed) {
  const auto tok = model::load_tokenizer(kSpm);
  const PromptMeasurer m(*tok, model::ChatTemplateKind::none);
  RulerGenerator a(config_for(2048), m);
  RulerGenerator b(config_for(2048), m);
  RulerGenerator other(config_for(2048, 43), m);
  const auto first = generate_multi_question(a, m, 5);
  EXPECT_EQ(first, generate_multi_question(b, m, 5));
  EXPECT_EQ(first, split_multi_question(b.generate("niah_multiquery", 5), m));
  EXPECT_NE(first.questions[0].key + first.questions[0].answers[0],
            generate_multi_question(other, m, 5).questions[0].key +
                generate_multi_question(other, m, 5).questions[0].answers[0]);
}

TEST(RulerMultiQuestion, RefusesOtherTasksAndMismatchedNeedles) {
  const auto tok = model::load_tokenizer(kSpm);
  const PromptMeasurer m(*tok, model::ChatTemplateKind::none);
  RulerGenerator generator(config_for(2048), m);
  EXPECT_THROW(split_multi_question(generator.generate("niah_multikey_1", 0), m), InternalError);
  RulerInstance broken = generator.generate("niah_multiquery", 0);
  std::swap(broken.answers[0], broken.answers[1]);  // keys no longer match their needles
  EXPECT_THROW(split_multi_question(broken, m), InternalError);
}

}  // namespace
}  // namespace kvaudit::benchmarks::ruler
