// The kvpress prompt split (NVIDIA/kvpress 8bb29b9, kvpress/pipeline.py,
// KVPressTextGenerationPipeline.preprocess, and evaluation/evaluate.py for query_aware), as text:
//
//   with a chat template:
//     separator = '#' * (len(context) + 10)              (len in code points)
//     rendered  = apply_chat_template([{"role": "user", "content": context + separator}],
//                                     add_generation_prompt=True, tokenize=False,
//                                     enable_thinking=False)
//     context_text, question_suffix = rendered.split(separator)
//   without one:
//     context_text = bos_token + context;  question_suffix = "\n"
//   then each question is fed as question + question_suffix + answer_prefix.
//
// So the user turn holds the context (and, in the full prompt, the question right after it, with
// no separator), and the answer prefix opens the assistant turn. query_aware (evaluate.py) first
// sets context = context + question (plain concatenation) and question = "".
//
// The three parts are what kvaudit tokenizes separately (docs/design/protocols.md §Separate
// tokenization): prefix_plus_context is the compressed prefill of the query-agnostic protocol;
// question and suffix_plus_answer_prefix are fed on top (kvpress tokenizes question + suffix +
// answer_prefix as one string). Their concatenation is exactly kvpress's context string followed
// by its question string. The optional system message is a kvaudit extension (kvpress never sends
// one): it is rendered as a leading system message.
//
// Reproduced quirks: Llama-3.1 trims leading whitespace of the context (content | trim); a context
// ending in '#' characters loses them to the suffix part, since Python's split finds the separator
// that early (the concatenation is unaffected).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runners/model/chat/chat_template.h"

namespace kvaudit::model {

// Which part the compressed prefill covers, as kvpress builds the strings.
enum class QueryVisibility {
  query_agnostic,  // context in the prefill, question fed afterwards
  query_aware,     // kvpress: context = context + question, question = ""
};

struct PromptSplitInput {
  ChatTemplateKind kind = ChatTemplateKind::none;
  std::string_view context;
  std::string_view question;
  std::string_view answer_prefix;
  std::optional<std::string_view> system;  // kvaudit extension; kvpress sends none
  QueryVisibility visibility = QueryVisibility::query_agnostic;
  // llama3_date_string, bos_text (none), control_token_literals; add_generation_prompt is
  // always true here, as in kvpress.
  RenderOptions options;
};

struct PromptParts {
  std::string prefix_plus_context;
  std::string question;
  std::string suffix_plus_answer_prefix;

  // prefix_plus_context + question + suffix_plus_answer_prefix: the full prompt text.
  std::string joined() const;
};

// Builds the three parts. Throws ModelInputError for text that is not valid UTF-8 (naming the
// field), for a system message with the `none` template, and whatever render_chat rejects.
PromptParts split_prompt(const PromptSplitInput& input);

std::string_view query_visibility_name(QueryVisibility visibility);  // "query-agnostic", ...

}  // namespace kvaudit::model
