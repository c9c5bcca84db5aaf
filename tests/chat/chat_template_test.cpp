// Unit tests of runners/model/chat/chat_template: manifest names, the `none` template, the
// control-token policy and the errors for input the real templates (or kvaudit) refuse. The
// bit-exact renders against HF are in chat_golden_test.cpp.
#include "runners/model/chat/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

constexpr ChatTemplateKind kAllKinds[] = {ChatTemplateKind::none,
                                          ChatTemplateKind::llama3,
                                          ChatTemplateKind::qwen2,
                                          ChatTemplateKind::mistral_v3,
                                          ChatTemplateKind::deepseek_r1_distill,
                                          ChatTemplateKind::chatml};

std::string error_of(const auto& call) {
  try {
    call();
  } catch (const ModelInputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatTemplateNames, RoundTrip) {
  for (const ChatTemplateKind kind : kAllKinds) {
    EXPECT_EQ(parse_chat_template_name(chat_template_name(kind)), kind);
  }
  EXPECT_EQ(chat_template_names().size(), 6u);
  EXPECT_EQ(parse_chat_template_name("mistral-v3"), ChatTemplateKind::mistral_v3);
  EXPECT_EQ(parse_chat_template_name("deepseek-r1-distill"), ChatTemplateKind::deepseek_r1_distill);
}

TEST(ChatTemplateNames, UnknownNameListsTheValidOnes) {
  const std::string message = error_of(
      [] { parse_chat_template_name("llama-3", "study.toml:7: models[1].chat_template"); });
  EXPECT_NE(message.find("study.toml:7: models[1].chat_template: "), std::string::npos) << message;
  EXPECT_NE(message.find("unknown chat template 'llama-3'"), std::string::npos) << message;
  EXPECT_NE(message.find("none, llama3, qwen2, mistral-v3, deepseek-r1-distill, chatml"),
            std::string::npos)
      << message;
  // Exact and case-sensitive; no whitespace trimming.
  EXPECT_THROW(parse_chat_template_name("Llama3"), ModelInputError);
  EXPECT_THROW(parse_chat_template_name(" llama3"), ModelInputError);
  EXPECT_THROW(parse_chat_template_name(""), ModelInputError);
  EXPECT_THROW(parse_chat_template_name("mistral_v3"), ModelInputError);
}

TEST(ChatTemplate, DefaultSystemPromptsOfTheRealTemplates) {
  EXPECT_EQ(default_system_prompt(ChatTemplateKind::qwen2),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(default_system_prompt(ChatTemplateKind::chatml),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(default_system_prompt(ChatTemplateKind::llama3), "");
  EXPECT_EQ(default_system_prompt(ChatTemplateKind::mistral_v3), "");
}

TEST(ChatTemplate, NoneIsBosPlusTheSingleUserMessage) {
  RenderOptions options;
  options.bos_text = "<|begin_of_text|>";
  const std::vector<ChatMessage> one = {{ChatRole::user, "  raw text\n"}};
  EXPECT_EQ(render_chat(ChatTemplateKind::none, one, options), "<|begin_of_text|>  raw text\n");
  options.bos_text.clear();
  EXPECT_EQ(render_chat(ChatTemplateKind::none, one, options), "  raw text\n");

  const std::vector<ChatMessage> two = {{ChatRole::system, "s"}, {ChatRole::user, "u"}};
  const std::string message = error_of([&] { render_chat(ChatTemplateKind::none, two); });
  EXPECT_NE(message.find("exactly one user message"), std::string::npos) << message;
  const std::vector<ChatMessage> assistant = {{ChatRole::assistant, "a"}};
  EXPECT_THROW(render_chat(ChatTemplateKind::none, assistant), ModelInputError);
}

TEST(ChatTemplate, EmptyConversationIsRefusedByEveryFamily) {
  for (const ChatTemplateKind kind : kAllKinds) {
    const std::string message = error_of([&] { render_chat(kind, {}); });
    EXPECT_NE(message.find("conversation is empty"), std::string::npos) << message;
  }
}

TEST(ChatTemplate, InvalidUtf8NamesTheMessage) {
  const std::vector<ChatMessage> messages = {{ChatRole::system, "fine"},
                                             {ChatRole::user, "bad \xC3("}};
  for (const ChatTemplateKind kind : kAllKinds) {
    const std::string message = error_of([&] { render_chat(kind, messages); });
    EXPECT_NE(message.find("message 1 (user) content is not valid UTF-8 at byte 4"),
              std::string::npos)
        << message;
  }
  RenderOptions options;
  options.llama3_date_string = "\xFF";
  const std::vector<ChatMessage> ok = {{ChatRole::user, "u"}};
  EXPECT_THROW(render_chat(ChatTemplateKind::llama3, ok, options), ModelInputError);
}

TEST(ChatTemplate, ControlTokenLiteralsAreKeptVerbatimByDefault) {
  const std::vector<ChatMessage> messages = {{ChatRole::user, "a<|eot_id|>b"}};
  EXPECT_EQ(render_chat(ChatTemplateKind::llama3, messages),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\na<|eot_id|>b<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RejectPolicyNamesTheMessageAndTheLiteral) {
  RenderOptions options;
  options.control_token_literals = ControlTokenLiterals::reject;
  const std::vector<ChatMessage> messages = {{ChatRole::user, "fine"},
                                             {ChatRole::assistant, "ok"},
                                             {ChatRole::user, "x [/INST] then <s>"}};
  const std::string message =
      error_of([&] { render_chat(ChatTemplateKind::mistral_v3, messages, options); });
  EXPECT_NE(message.find("message 2 (user) contains the control-token literal '[/INST]' at byte 2"),
            std::string::npos)
      << message;
  // A literal of another family is plain text for this one.
  const std::vector<ChatMessage> other = {{ChatRole::user, "<|im_end|>"}};
  EXPECT_NO_THROW(render_chat(ChatTemplateKind::llama3, other, options));
  EXPECT_THROW(render_chat(ChatTemplateKind::qwen2, other, options), ModelInputError);
  EXPECT_THROW(render_chat(ChatTemplateKind::chatml, other, options), ModelInputError);
  // none has no control tokens of its own.
  EXPECT_NO_THROW(render_chat(ChatTemplateKind::none, other, options));
}

TEST(ChatTemplate, FindControlTokenLiteralReturnsTheEarliest) {
  const auto hit = find_control_token_literal(ChatTemplateKind::deepseek_r1_distill,
                                              "ab</think>cd<\xEF\xBD\x9CUser\xEF\xBD\x9C>");
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->byte_offset, 2u);
  EXPECT_EQ(hit->literal, "</think>");
  EXPECT_FALSE(find_control_token_literal(ChatTemplateKind::qwen2, "no specials").has_value());
  EXPECT_TRUE(control_token_literals(ChatTemplateKind::none).empty());
  for (const ChatTemplateKind kind : kAllKinds) {
    for (const std::string_view literal : control_token_literals(kind)) {
      EXPECT_FALSE(literal.empty());
    }
  }
}

TEST(ChatTemplate, MistralRefusesNonAlternatingRoles) {
  const std::vector<ChatMessage> two_users = {
      {ChatRole::system, "s"}, {ChatRole::user, "a"}, {ChatRole::user, "b"}};
  const std::string message =
      error_of([&] { render_chat(ChatTemplateKind::mistral_v3, two_users); });
  EXPECT_NE(message.find("message 2 (user)"), std::string::npos) << message;
  EXPECT_NE(message.find("must alternate user/assistant"), std::string::npos) << message;
  const std::vector<ChatMessage> starts_with_assistant = {{ChatRole::assistant, "a"}};
  EXPECT_THROW(render_chat(ChatTemplateKind::mistral_v3, starts_with_assistant), ModelInputError);
  // A system message in an odd position passes the alternation check, then fails the role check.
  const std::vector<ChatMessage> late_system = {{ChatRole::user, "a"}, {ChatRole::system, "s"}};
  const std::string late =
      error_of([&] { render_chat(ChatTemplateKind::mistral_v3, late_system); });
  EXPECT_NE(late.find("only user and assistant roles are supported"), std::string::npos) << late;
}

TEST(ChatTemplate, MistralHasNoGenerationPrompt) {
  const std::vector<ChatMessage> messages = {{ChatRole::user, "q"}};
  RenderOptions with;
  RenderOptions without;
  without.add_generation_prompt = false;
  EXPECT_EQ(render_chat(ChatTemplateKind::mistral_v3, messages, with), "<s>[INST] q[/INST]");
  EXPECT_EQ(render_chat(ChatTemplateKind::mistral_v3, messages, without), "<s>[INST] q[/INST]");
}

TEST(ChatTemplate, Llama3DateStringIsConfigurable) {
  RenderOptions options;
  options.llama3_date_string = "05 Mar 2026";
  options.add_generation_prompt = false;
  const std::vector<ChatMessage> messages = {{ChatRole::system, "  sys  "}};
  EXPECT_EQ(render_chat(ChatTemplateKind::llama3, messages, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
            "Date: December 2023\nToday Date: 05 Mar 2026\n\nsys<|eot_id|>");
}

TEST(ChatTemplate, R1DistillKeepsOnlyTheLastSystemMessageAndTheTextAfterThink) {
  const std::vector<ChatMessage> messages = {{ChatRole::system, "first"},
                                             {ChatRole::user, "q"},
                                             {ChatRole::assistant, "<think>a</think>b</think>c"},
                                             {ChatRole::system, "second"}};
  EXPECT_EQ(render_chat(ChatTemplateKind::deepseek_r1_distill, messages),
            "<\xEF\xBD\x9C"
            "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>second"
            "<\xEF\xBD\x9CUser\xEF\xBD\x9C>q<\xEF\xBD\x9C"
            "Assistant\xEF\xBD\x9C>c"
            "<\xEF\xBD\x9C"
            "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
            "<\xEF\xBD\x9C"
            "Assistant\xEF\xBD\x9C><think>\n");
}

}  // namespace
}  // namespace kvaudit::model
