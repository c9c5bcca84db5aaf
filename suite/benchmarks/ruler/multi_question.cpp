// RULER's multi-question form (multi_question.h): niah_multiquery instances split into one question
// per needle.
#include "suite/benchmarks/ruler/multi_question.h"

#include "base/errors.h"
#include "suite/benchmarks/ruler/ruler_templates.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr std::string_view kCombinedStart = "What are all the special magic numbers for ";
constexpr std::string_view kCombinedEnd = " mentioned in the provided text?";

[[noreturn]] void fail(const RulerInstance& instance, const std::string& what) {
  throw InternalError("RULER multi-question form, " + instance.task + " #" +
                      std::to_string(instance.index) + ": " + what);
}

// "K1, K2, K3, and K4" -> {K1, K2, K3, K4} (RULER's join of the queried keys, niah_task.cpp).
std::vector<std::string> keys_of(const RulerInstance& instance) {
  const std::string& question = instance.question;
  if (question.rfind(kCombinedStart, 0) != 0)
    fail(instance, "the question is not niah's plural one");
  const std::size_t end = question.rfind(kCombinedEnd);
  if (end == std::string::npos || end < kCombinedStart.size()) {
    fail(instance, "the question does not end as niah's");
  }
  const std::string query = question.substr(kCombinedStart.size(), end - kCombinedStart.size());
  const std::size_t last = query.rfind(", and ");
  if (last == std::string::npos) fail(instance, "the question names fewer than 2 keys");
  std::vector<std::string> keys;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = query.find(", ", from);
    if (comma >= last) break;
    keys.push_back(query.substr(from, comma - from));
    from = comma + 2;
  }
  keys.push_back(query.substr(from, last - from));
  keys.push_back(query.substr(last + 6));
  return keys;
}

// The question and answer prefix RULER's niah template gives one key with one value: the template
// singularised exactly as for #q·#v = 1 (niah_task.cpp), split the kvpress way.
PromptSplit single_question(const std::string& key) {
  std::string full = std::string(family_template(Family::niah).template_text) +
                     std::string(family_template(Family::niah).answer_prefix);
  full = replace_all(full, "Some", "A");
  full = replace_all(full, "are all", "is");
  full = replace_all(full, "are", "is");
  full = replace_all(full, "answers", "answer");
  const std::string text =
      format_template(full, {{"type_needle_v", "number"}, {"context", ""}, {"query", key}});
  return split_ruler_prompt(Family::niah, text);
}

}  // namespace

RulerInstance RulerMultiQuestionInstance::question_instance(std::size_t j) const {
  const RulerQuestion& q = questions.at(j);
  RulerInstance instance = shared;
  instance.question = q.question;
  instance.answer_prefix = q.answer_prefix;
  instance.answers = q.answers;
  instance.question_tokens = q.question_tokens;
  return instance;
}

RulerMultiQuestionInstance split_multi_question(const RulerInstance& multiquery,
                                                const PromptMeasurer& measurer) {
  if (multiquery.task != kMultiQuestionSourceTask) {
    fail(multiquery, "only " + std::string(kMultiQuestionSourceTask) + " instances have one");
  }
  const std::vector<std::string> keys = keys_of(multiquery);
  if (keys.size() != multiquery.answers.size()) {
    fail(multiquery, std::to_string(keys.size()) + " keys but " +
                         std::to_string(multiquery.answers.size()) + " answers");
  }
  RulerMultiQuestionInstance out;
  out.shared = multiquery;
  for (std::size_t j = 0; j < keys.size(); ++j) {
    RulerQuestion q;
    q.key = keys[j];
    q.answers = {multiquery.answers[j]};
    const std::string needle = format_template(
        kNeedleTemplate,
        {{"type_needle_v", "numbers"}, {"key", keys[j]}, {"value", multiquery.answers[j]}});
    q.needle_offset = multiquery.context.find(needle);
    if (q.needle_offset == std::string::npos ||
        multiquery.context.find(needle, q.needle_offset + 1) != std::string::npos) {
      fail(multiquery, "the needle of key '" + keys[j] + "' is not in the context exactly once");
    }
    PromptSplit split = single_question(keys[j]);
    q.question = std::move(split.question);
    q.answer_prefix = std::move(split.answer_prefix);
    const PromptTokens tokens = measurer.measure(multiquery.context, q.question, q.answer_prefix);
    if (tokens.context != multiquery.context_tokens) {
      fail(multiquery, "the measurer is not the one the instance was generated with");
    }
    q.question_tokens = tokens.question;
    if (tokens.prompt() + multiquery.max_new_tokens > multiquery.length) {
      fail(multiquery, "question " + std::to_string(j) + " does not fit the length");
    }
    out.questions.push_back(std::move(q));
  }
  return out;
}

RulerMultiQuestionInstance generate_multi_question(RulerGenerator& generator,
                                                   const PromptMeasurer& measurer,
                                                   std::int64_t index) {
  return split_multi_question(generator.generate(kMultiQuestionSourceTask, index), measurer);
}

}  // namespace kvaudit::benchmarks::ruler
