// One generated RULER instance as kvaudit stores it (docs/design/benchmarks.md §RULER kvpress
// split, §What an instance stores): the kvpress split of RULER's prompt, the gold answers, the
// generation budget, the haystack size the length search chose and the token counts measured with
// the generation tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvaudit::benchmarks::ruler {

struct RulerInstance {
  std::string task;
  std::int64_t index = 0;
  std::uint64_t seed = 0;
  std::int64_t length = 0;  // nominal L
  std::string context;
  std::string question;
  std::string answer_prefix;
  std::vector<std::string> answers;
  int max_new_tokens = 0;
  std::int64_t haystack_units = 0;
  std::string haystack_unit;  // "word", "sentence", "needle", "document"
  std::string tokenizer;      // PromptMeasurer::description() of the generation side
  std::int64_t context_tokens = 0;
  std::int64_t question_tokens = 0;

  std::int64_t prompt_tokens() const { return context_tokens + question_tokens; }
  std::int64_t total_tokens() const { return prompt_tokens() + max_new_tokens; }
  // RULER's prompt as one string (input + answer prefix).
  std::string full_text() const { return context + question + answer_prefix; }

  bool operator==(const RulerInstance&) const = default;
};

}  // namespace kvaudit::benchmarks::ruler
