// Marker-based recognition of real chat templates; see chat_template_detect.h. The fragments below
// are written in the normalized form (no whitespace outside string literals, single quotes); a
// "\\n" is the two characters backslash-n as they appear inside a Jinja string literal.
#include "runners/model/chat/chat_template_detect.h"

#include <cstddef>
#include <vector>

namespace kvaudit::model {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

struct FamilyMarkers {
  ChatTemplateKind kind;
  std::vector<std::string_view> required;
  std::vector<std::string_view> forbidden;
};

const std::vector<FamilyMarkers>& family_markers() {
  static const std::vector<FamilyMarkers> markers = {
      {ChatTemplateKind::llama3,
       {"bos_token}}", "setdate_string='26 Jul 2024'", "system_message=messages[0]['content']|trim",
        "'<|start_header_id|>system<|end_header_id|>\\n\\n'",
        "'Cutting Knowledge Date: December 2023\\n'", "'Today Date: '+date_string+'\\n\\n'",
        "'<|start_header_id|>'+message['role']+'<|end_header_id|>\\n\\n'+message['content']|trim+"
        "'<|eot_id|>'",
        "'<|start_header_id|>assistant<|end_header_id|>\\n\\n'"},
       // Llama-3.2 prints today's date through strftime_now.
       {"strftime_now"}},
      {ChatTemplateKind::qwen2,
       {"'<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\\n'",
        "'<|im_start|>system\\n'+messages[0]['content']+'<|im_end|>\\n'",
        "'<|im_start|>'+message.role+'\\n'+message.content+'<|im_end|>'+'\\n'",
        "'<|im_start|>assistant\\n'"},
       // Qwen3 / QwQ thinking templates.
       {"<think>", "enable_thinking"}},
      {ChatTemplateKind::chatml,
       {"'<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\\n'",
        "messages[0]['role']!='system'",
        "'<|im_start|>'+message['role']+'\\n'+message['content']+'<|im_end|>'+'\\n'",
        "'<|im_start|>assistant\\n'"},
       {"<think>", "enable_thinking"}},
      {ChatTemplateKind::mistral_v3,
       {"bos_token}}", "loop.lastandsystem_messageisdefined",
        "'[INST] '+system_message+'\\n\\n'+message['content']+'[/INST]'",
        "'[INST] '+message['content']+'[/INST]'", "' '+message['content']|trim+eos_token"},
       // v7 puts the system prompt in its own block.
       {"[SYSTEM_PROMPT]"}},
      {ChatTemplateKind::deepseek_r1_distill,
       {"bos_token}}{{ns.system_prompt}}", "setns.system_prompt=message['content']",
        "'<\uFF5CUser\uFF5C>'+message['content']}}", "content.split('</think>')[-1]",
        "'<\uFF5CAssistant\uFF5C>'+content+'<\uFF5Cend\u2581of\u2581sentence\uFF5C>'",
        "'<\uFF5CAssistant\uFF5C><think>\\n'"},
       // Copies edited to close the thinking block when enable_thinking is false.
       {"enable_thinking"}},
  };
  return markers;
}

bool matches(const std::string& normalized, const FamilyMarkers& family) {
  for (const std::string_view fragment : family.required) {
    if (normalized.find(fragment) == std::string::npos) return false;
  }
  for (const std::string_view fragment : family.forbidden) {
    if (normalized.find(fragment) != std::string::npos) return false;
  }
  return true;
}

}  // namespace

std::string normalize_jinja_for_markers(std::string_view jinja) {
  std::string out;
  out.reserve(jinja.size());
  std::size_t i = 0;
  const std::size_t n = jinja.size();
  const auto starts_with = [&](std::size_t at, std::string_view s) {
    return jinja.substr(at, s.size()) == s;
  };
  while (i < n) {
    if (starts_with(i, "{#")) {  // comment: dropped up to and including "#}"
      const std::size_t end = jinja.find("#}", i + 2);
      i = end == std::string_view::npos ? n : end + 2;
      continue;
    }
    if (starts_with(i, "{{") || starts_with(i, "{%")) {  // expression or statement tag
      const std::string_view close = jinja[i + 1] == '{' ? "}}" : "%}";
      out.append(jinja.substr(i, 2));
      i += 2;
      while (i < n && !starts_with(i, close)) {
        const char c = jinja[i];
        if (c == '\'' || c == '"') {  // string literal: copied verbatim with ' delimiters
          out += '\'';
          ++i;
          while (i < n && jinja[i] != c) {
            if (jinja[i] == '\\' && i + 1 < n) {
              out.append(jinja.substr(i, 2));
              i += 2;
            } else if (jinja[i] == '\n') {  // a raw newline means the same as \n
              out += "\\n";
              ++i;
            } else if (jinja[i] == '\t') {
              out += "\\t";
              ++i;
            } else if (jinja[i] == '\r') {
              out += "\\r";
              ++i;
            } else {
              out += jinja[i++];
            }
          }
          if (i < n) ++i;  // closing quote
          out += '\'';
        } else {
          if (!is_ascii_space(c)) out += c;
          ++i;
        }
      }
      if (i < n) {
        out.append(close);
        i += close.size();
      }
      continue;
    }
    if (!is_ascii_space(jinja[i])) out += jinja[i];  // raw template text
    ++i;
  }
  return out;
}

std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja) {
  const std::string normalized = normalize_jinja_for_markers(jinja);
  std::optional<ChatTemplateKind> found;
  for (const FamilyMarkers& family : family_markers()) {
    if (!matches(normalized, family)) continue;
    if (found) return std::nullopt;  // ambiguous
    found = family.kind;
  }
  return found;
}

}  // namespace kvaudit::model
