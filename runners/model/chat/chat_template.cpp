// Hard-coded renderers of the built-in chat templates; see chat_template.h for what each family's
// real template does. Each renderer mirrors the tools-free branch of its Jinja source statement by
// statement; the golden test (tests/chat/chat_golden_test.cpp) checks them against HF.
#include "runners/model/chat/chat_template.h"

#include <array>
#include <cstddef>
#include <string>

#include "runners/model/chat/python_str.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

constexpr std::array<std::string_view, 6> kNames = {
    "none", "llama3", "qwen2", "mistral-v3", "deepseek-r1-distill", "chatml"};

constexpr std::string_view kQwenDefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr std::string_view kSmolLMDefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// Control-token strings per family (see control_token_literals()).
constexpr std::array<std::string_view, 7> kLlama3Literals = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>",        "<|eom_id|>",      "<|python_tag|>"};
constexpr std::array<std::string_view, 3> kChatMLLiterals = {"<|im_start|>", "<|im_end|>",
                                                             "<|endoftext|>"};
constexpr std::array<std::string_view, 9> kMistralV3Literals = {"<s>",
                                                                "</s>",
                                                                "[INST]",
                                                                "[/INST]",
                                                                "[TOOL_CALLS]",
                                                                "[AVAILABLE_TOOLS]",
                                                                "[/AVAILABLE_TOOLS]",
                                                                "[TOOL_RESULTS]",
                                                                "[/TOOL_RESULTS]"};
// DeepSeek's markers use U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER ONE EIGHTH BLOCK.
constexpr std::string_view kR1Bos = "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>";
constexpr std::string_view kR1Eos = "<\uFF5Cend\u2581of\u2581sentence\uFF5C>";
constexpr std::string_view kR1User = "<\uFF5CUser\uFF5C>";
constexpr std::string_view kR1Assistant = "<\uFF5CAssistant\uFF5C>";
constexpr std::array<std::string_view, 6> kR1Literals = {kR1Bos,       kR1Eos,    kR1User,
                                                         kR1Assistant, "<think>", "</think>"};

std::size_t kind_index(ChatTemplateKind kind) { return static_cast<std::size_t>(kind); }

std::string describe(std::size_t index, const ChatMessage& m) {
  return "message " + std::to_string(index) + " (" + std::string(chat_role_name(m.role)) + ")";
}

void check_messages(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                    const RenderOptions& options) {
  const std::string family(chat_template_name(kind));
  if (messages.empty()) {
    throw ModelInputError("chat template " + family +
                          ": the conversation is empty (HF "
                          "apply_chat_template refuses an empty conversation)");
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (const auto bad = first_invalid_utf8_byte(messages[i].content)) {
      throw ModelInputError("chat template " + family + ": " + describe(i, messages[i]) +
                            " content is not valid UTF-8 at byte " + std::to_string(*bad));
    }
    if (options.control_token_literals == ControlTokenLiterals::reject) {
      if (const auto hit = find_control_token_literal(kind, messages[i].content)) {
        throw ModelInputError("chat template " + family + ": " + describe(i, messages[i]) +
                              " contains the control-token literal '" + std::string(hit->literal) +
                              "' at byte " + std::to_string(hit->byte_offset) +
                              " (rejected by ControlTokenLiterals::reject)");
      }
    }
  }
  if (const auto bad = first_invalid_utf8_byte(options.llama3_date_string)) {
    throw ModelInputError("chat template " + family +
                          ": llama3_date_string is not valid UTF-8 "
                          "at byte " +
                          std::to_string(*bad));
  }
  if (const auto bad = first_invalid_utf8_byte(options.bos_text)) {
    throw ModelInputError("chat template " + family + ": bos_text is not valid UTF-8 at byte " +
                          std::to_string(*bad));
  }
}

// meta-llama-Llama-3.1-8B-Instruct.jinja, tools == none.
std::string render_llama3(std::span<const ChatMessage> messages, const RenderOptions& options) {
  std::string out = "<|begin_of_text|>";
  std::string_view system_message;
  if (messages.front().role == ChatRole::system) {
    system_message = python_strip(messages.front().content);
    messages = messages.subspan(1);
  }
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  out += "Cutting Knowledge Date: December 2023\n";
  out += "Today Date: ";
  out += options.llama3_date_string;
  out += "\n\n";
  out += system_message;
  out += "<|eot_id|>";
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>";
    out += chat_role_name(m.role);
    out += "<|end_header_id|>\n\n";
    out += python_strip(m.content);
    out += "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Shared ChatML turn: '<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'.
void append_chatml_turn(std::string& out, std::string_view role, std::string_view content) {
  out += "<|im_start|>";
  out += role;
  out += '\n';
  out += content;
  out += "<|im_end|>\n";
}

// Qwen-Qwen2.5-7B-Instruct.jinja, no tools.
std::string render_qwen2(std::span<const ChatMessage> messages, const RenderOptions& options) {
  std::string out;
  if (messages.front().role == ChatRole::system) {
    append_chatml_turn(out, "system", messages.front().content);
  } else {
    append_chatml_turn(out, "system", kQwenDefaultSystem);
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    // user, assistant (no tool calls), and system except the first message.
    if (messages[i].role == ChatRole::system && i == 0) continue;
    append_chatml_turn(out, chat_role_name(messages[i].role), messages[i].content);
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Mistral v3 (SentencePiece) template, tools == none.
std::string render_mistral_v3(std::span<const ChatMessage> messages) {
  std::optional<std::string_view> system_message;
  std::size_t first = 0;
  if (messages.front().role == ChatRole::system) {
    system_message = messages.front().content;
    first = 1;
  }
  // The template's alternation check runs over all messages before anything is printed.
  for (std::size_t i = first; i < messages.size(); ++i) {
    const bool expect_user = (i - first) % 2 == 0;
    if ((messages[i].role == ChatRole::user) != expect_user) {
      throw ModelInputError("chat template mistral-v3: " + describe(i, messages[i]) +
                            ": after the optional system message, conversation roles must "
                            "alternate user/assistant/user/assistant/...");
    }
  }
  std::string out = "<s>";
  for (std::size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == ChatRole::user) {
      out += "[INST] ";
      if (last && system_message) {
        out += *system_message;
        out += "\n\n";
      }
      out += m.content;
      out += "[/INST]";
    } else if (m.role == ChatRole::assistant) {
      out += ' ';
      out += python_strip(m.content);
      out += "</s>";
    } else {
      throw ModelInputError("chat template mistral-v3: " + describe(i, m) +
                            ": only user and assistant roles are supported, with the exception "
                            "of an initial optional system message");
    }
  }
  return out;
}

// deepseek-ai-DeepSeek-R1-Distill-*.jinja (HF original, no tool messages).
std::string render_deepseek_r1_distill(std::span<const ChatMessage> messages,
                                       const RenderOptions& options) {
  std::string_view system_prompt;
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::system) system_prompt = m.content;  // the last one wins
  }
  std::string out(kR1Bos);
  out += system_prompt;
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::user) {
      out += kR1User;
      out += m.content;
    } else if (m.role == ChatRole::assistant) {
      std::string_view content = m.content;
      constexpr std::string_view kEndThink = "</think>";
      if (const std::size_t at = content.rfind(kEndThink); at != std::string_view::npos) {
        content = content.substr(at + kEndThink.size());  // content.split('</think>')[-1]
      }
      out += kR1Assistant;
      out += content;
      out += kR1Eos;
    }
  }
  if (options.add_generation_prompt) {
    out += kR1Assistant;
    out += "<think>\n";
  }
  return out;
}

// SmolLM2-Instruct GGUF tokenizer.chat_template.
std::string render_chatml(std::span<const ChatMessage> messages, const RenderOptions& options) {
  std::string out;
  if (messages.front().role != ChatRole::system) {
    append_chatml_turn(out, "system", kSmolLMDefaultSystem);
  }
  for (const ChatMessage& m : messages) append_chatml_turn(out, chat_role_name(m.role), m.content);
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// No template: kvpress's `context = bos_token + context`.
std::string render_none(std::span<const ChatMessage> messages, const RenderOptions& options) {
  if (messages.size() != 1 || messages.front().role != ChatRole::user) {
    throw ModelInputError(
        "chat template none: the conversation must be exactly one user message (without a chat "
        "template the prompt is bos_text + the user text), got " +
        std::to_string(messages.size()) + " message(s) starting with a " +
        std::string(chat_role_name(messages.front().role)) + " message");
  }
  return options.bos_text + messages.front().content;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) { return kNames.at(kind_index(kind)); }

std::span<const std::string_view> chat_template_names() { return kNames; }

ChatTemplateKind parse_chat_template_name(std::string_view name, std::string_view where) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ChatTemplateKind>(i);
  }
  std::string valid;
  for (const std::string_view n : kNames) {
    if (!valid.empty()) valid += ", ";
    valid += n;
  }
  std::string message;
  if (!where.empty()) {
    message += where;
    message += ": ";
  }
  message += "unknown chat template '" + std::string(name) + "'; valid names: " + valid;
  throw ModelInputError(message);
}

std::string_view chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
  }
  return "?";
}

std::string_view default_system_prompt(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::qwen2:
      return kQwenDefaultSystem;
    case ChatTemplateKind::chatml:
      return kSmolLMDefaultSystem;
    default:
      return {};
  }
}

std::span<const std::string_view> control_token_literals(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::llama3:
      return kLlama3Literals;
    case ChatTemplateKind::qwen2:
    case ChatTemplateKind::chatml:
      return kChatMLLiterals;
    case ChatTemplateKind::mistral_v3:
      return kMistralV3Literals;
    case ChatTemplateKind::deepseek_r1_distill:
      return kR1Literals;
    case ChatTemplateKind::none:
      break;
  }
  return {};
}

std::optional<ControlTokenHit> find_control_token_literal(ChatTemplateKind kind,
                                                          std::string_view text) {
  std::optional<ControlTokenHit> best;
  for (const std::string_view literal : control_token_literals(kind)) {
    const std::size_t at = text.find(literal);
    if (at != std::string_view::npos && (!best || at < best->byte_offset)) {
      best = ControlTokenHit{at, literal};
    }
  }
  return best;
}

std::string render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                        const RenderOptions& options) {
  check_messages(kind, messages, options);
  switch (kind) {
    case ChatTemplateKind::none:
      return render_none(messages, options);
    case ChatTemplateKind::llama3:
      return render_llama3(messages, options);
    case ChatTemplateKind::qwen2:
      return render_qwen2(messages, options);
    case ChatTemplateKind::mistral_v3:
      return render_mistral_v3(messages);
    case ChatTemplateKind::deepseek_r1_distill:
      return render_deepseek_r1_distill(messages, options);
    case ChatTemplateKind::chatml:
      return render_chatml(messages, options);
  }
  throw ModelInputError("chat template: unknown kind " + std::to_string(kind_index(kind)));
}

}  // namespace kvaudit::model
