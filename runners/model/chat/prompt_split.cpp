// kvpress's context/question/answer-prefix split, reproduced step by step on strings; see
// prompt_split.h for the Python it follows.
#include "runners/model/chat/prompt_split.h"

#include <cstddef>
#include <vector>

#include "runners/model/chat/python_str.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

void require_utf8(std::string_view field, std::string_view text) {
  if (const auto bad = first_invalid_utf8_byte(text)) {
    throw ModelInputError("prompt split: " + std::string(field) + " is not valid UTF-8 at byte " +
                          std::to_string(*bad));
  }
}

}  // namespace

std::string PromptParts::joined() const {
  return prefix_plus_context + question + suffix_plus_answer_prefix;
}

std::string_view query_visibility_name(QueryVisibility visibility) {
  return visibility == QueryVisibility::query_aware ? "query-aware" : "query-agnostic";
}

PromptParts split_prompt(const PromptSplitInput& input) {
  require_utf8("context", input.context);
  require_utf8("question", input.question);
  require_utf8("answer_prefix", input.answer_prefix);
  if (input.system) require_utf8("system", *input.system);

  // evaluate.py, query_aware: df.context = df.context + df.question; df.question = "".
  std::string context(input.context);
  std::string question(input.question);
  if (input.visibility == QueryVisibility::query_aware) {
    context += question;
    question.clear();
  }

  PromptParts parts;
  if (input.kind == ChatTemplateKind::none) {
    if (input.system) {
      throw ModelInputError(
          "prompt split: a system message needs a chat template (template "
          "is none)");
    }
    parts.prefix_plus_context = input.options.bos_text + context;
    parts.question = std::move(question);
    parts.suffix_plus_answer_prefix = "\n" + std::string(input.answer_prefix);
    return parts;
  }

  const std::string separator(python_code_point_count(context) + 10, '#');
  std::vector<ChatMessage> messages;
  if (input.system) messages.push_back({ChatRole::system, std::string(*input.system)});
  messages.push_back({ChatRole::user, context + separator});
  RenderOptions options = input.options;
  options.add_generation_prompt = true;
  const std::string rendered = render_chat(input.kind, messages, options);

  // context, question_suffix = rendered.split(separator): exactly one occurrence, or Python raises.
  const std::size_t at = rendered.find(separator);
  if (at == std::string::npos ||
      rendered.find(separator, at + separator.size()) != std::string::npos) {
    throw ModelInputError("prompt split: the " + std::string(chat_template_name(input.kind)) +
                          " rendering does not contain the '#' separator exactly once");
  }
  parts.prefix_plus_context = rendered.substr(0, at);
  parts.question = std::move(question);
  parts.suffix_plus_answer_prefix =
      rendered.substr(at + separator.size()) + std::string(input.answer_prefix);
  return parts;
}

}  // namespace kvaudit::model
