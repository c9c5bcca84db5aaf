// Measures a RULER instance the way the runner will feed it (docs/design/benchmarks.md §Tokenizer
// check, step 1):
// the kvpress split (runners/model/chat/prompt_split.h) renders context | question | answer prefix
// with the chat template (or, with none, the tokenizer's BOS text + context and "\n" before the
// answer prefix, as kvpress does), then
//   context tokens  = encode(prefix_plus_context)
//   question tokens = encode(question + suffix_plus_answer_prefix)
// each with add_special_tokens = false and special-token parsing on (HF's default in kvpress; the
// chat template already holds the special tokens). prompt = context + question tokens; an instance
// fits a length L when prompt + max_new_tokens ≤ L.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runners/model/chat/chat_template.h"
#include "runners/model/tokenizer/tokenizer.h"

namespace kvaudit::benchmarks::ruler {

struct PromptTokens {
  std::int64_t context = 0;
  std::int64_t question = 0;
  std::int64_t prompt() const { return context + question; }
};

class PromptMeasurer {
 public:
  // `tokenizer` must outlive the measurer.
  PromptMeasurer(const model::Tokenizer& tokenizer, model::ChatTemplateKind chat_template);

  PromptTokens measure(std::string_view context, std::string_view question,
                       std::string_view answer_prefix) const;
  // Tokens of plain text without special tokens (RULER's text_to_tokens).
  std::size_t count_raw(std::string_view text) const;

  model::ChatTemplateKind chat_template() const { return chat_template_; }
  std::string description() const;  // tokenizer description + chat template name

 private:
  const model::Tokenizer& tokenizer_;
  model::ChatTemplateKind chat_template_;
  std::string bos_text_;
};

}  // namespace kvaudit::benchmarks::ruler
