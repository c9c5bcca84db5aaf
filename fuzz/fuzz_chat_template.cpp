// Fuzz target: chat-template recognition (untrusted Jinja from tokenizer_config.json or GGUF
// metadata) and the renderers and kvpress split on untrusted message text. Detection must never
// fail; rendering and splitting must either succeed or raise ModelInputError (invalid UTF-8,
// roles a template refuses); anything else (crash, other exception, sanitizer report) is a bug.
// Invariants checked: the question part is the question, and for templates that do not trim, the
// split around the context equals rendering the context alone as the user message.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runners/model/chat/chat_template.h"
#include "runners/model/chat/chat_template_detect.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/chat/python_str.h"
#include "runners/model/model_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::model;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)detect_chat_template(text);
  if (!first_invalid_utf8_byte(text)) {
    const std::string_view stripped = python_strip(text);
    if (stripped.size() > text.size()) std::abort();
  }

  // The input as a conversation: split at the first two NUL bytes into system / user / assistant.
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size() && pieces.size() < 3; ++i) {
    if (i == text.size() || text[i] == '\0') {
      pieces.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  const ChatRole roles[] = {ChatRole::system, ChatRole::user, ChatRole::assistant};
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    messages.push_back({roles[i], std::string(pieces[i])});
  }
  for (const std::string_view name : chat_template_names()) {
    const ChatTemplateKind kind = parse_chat_template_name(name);
    try {
      (void)render_chat(kind, messages);
    } catch (const ModelInputError&) {
    }
    try {
      PromptSplitInput input;
      input.kind = kind;
      input.context = pieces.front();
      input.question = pieces.size() > 1 ? pieces[1] : std::string_view{};
      input.answer_prefix = pieces.size() > 2 ? pieces[2] : std::string_view{};
      const PromptParts parts = split_prompt(input);
      if (parts.question != input.question) std::abort();
      // Templates that insert the user text untrimmed: the split around the context is the plain
      // rendering of the context as the only user message.
      if (kind != ChatTemplateKind::llama3 && kind != ChatTemplateKind::none) {
        const std::vector<ChatMessage> alone = {{ChatRole::user, std::string(input.context)}};
        const std::string rendered = render_chat(kind, alone);
        const std::size_t prefix_size = parts.prefix_plus_context.size();
        const std::size_t suffix_size =
            parts.suffix_plus_answer_prefix.size() - input.answer_prefix.size();
        if (parts.prefix_plus_context + parts.suffix_plus_answer_prefix.substr(0, suffix_size) !=
                rendered ||
            prefix_size > rendered.size()) {
          std::abort();
        }
      }
    } catch (const ModelInputError&) {
    }
  }
  return 0;
}
