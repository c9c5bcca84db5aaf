// PromptMeasurer: see prompt_measure.h.
#include "suite/benchmarks/ruler/prompt_measure.h"

#include "runners/model/chat/prompt_split.h"

namespace kvaudit::benchmarks::ruler {

PromptMeasurer::PromptMeasurer(const model::Tokenizer& tokenizer,
                               model::ChatTemplateKind chat_template)
    : tokenizer_(tokenizer), chat_template_(chat_template) {
  if (const auto bos = tokenizer_.bos_id()) {
    if (const auto text = tokenizer_.id_to_token(*bos)) bos_text_ = *text;
  }
}

PromptTokens PromptMeasurer::measure(std::string_view context, std::string_view question,
                                     std::string_view answer_prefix) const {
  model::PromptSplitInput input;
  input.kind = chat_template_;
  input.context = context;
  input.question = question;
  input.answer_prefix = answer_prefix;
  input.options.bos_text = bos_text_;
  const model::PromptParts parts = model::split_prompt(input);
  const model::EncodeOptions options{.add_special_tokens = false, .parse_special = true};
  PromptTokens t;
  t.context =
      static_cast<std::int64_t>(tokenizer_.encode(parts.prefix_plus_context, options).size());
  t.question = static_cast<std::int64_t>(
      tokenizer_.encode(parts.question + parts.suffix_plus_answer_prefix, options).size());
  return t;
}

std::size_t PromptMeasurer::count_raw(std::string_view text) const {
  return tokenizer_.encode(text, {.add_special_tokens = false, .parse_special = false}).size();
}

std::string PromptMeasurer::description() const {
  return tokenizer_.description() + ", chat template " +
         std::string(model::chat_template_name(chat_template_));
}

}  // namespace kvaudit::benchmarks::ruler
