// Unit tests of runners/model/chat/chat_template_detect on marker snippets: the normalization, one
// snippet per family (in the HF one-line style and in a reformatted multi-line style), the
// look-alikes each family's forbidden markers exclude, ambiguity, and hostile input. Detection on
// the real templates is recorded by tools/golden/make_chat_golden.py (see chat_golden_test.cpp).
#include "runners/model/chat/chat_template_detect.h"

#include <gtest/gtest.h>

#include <string>

namespace kvaudit::model {
namespace {

// The statements of each real template that carry its markers (tools branches left out).
const std::string kLlama3 =
    "{{- bos_token }}\n"
    "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n"
    "{%- endif %}\n"
    "{#- This block extracts the system message, so we can't miss it. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}\n";

const std::string kQwen2 =
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// SmolLM2's GGUF copy has raw newlines inside its string literals.
const std::string kChatML =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

const std::string kMistralV3 =
    "{{- bos_token }}\n{%- for message in loop_messages %}\n"
    "    {%- if message[\"role\"] == \"user\" %}\n"
    "        {%- if loop.last and system_message is defined %}\n"
    "            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + "
    "\"[/INST]\" }}\n"
    "        {%- else %}\n"
    "            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n"
    "        {%- endif %}\n"
    "    {%- elif message[\"role\"] == \"assistant\" %}\n"
    "        {{- \" \" + message[\"content\"]|trim + eos_token}}\n"
    "    {%- endif %}\n{%- endfor %}\n";

const std::string kR1 =
    "{%- set ns = namespace(is_first=false, is_tool=false, system_prompt='') %}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
    "{{bos_token}}{{ns.system_prompt}}"
    "{%- for message in messages %}{%- if message['role'] == 'user' %}"
    "{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['content']}}{%- endif %}"
    "{%- if message['role'] == 'assistant' and message['content'] is not none %}"
    "{% set content = message['content'] %}{% if '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{'<\xEF\xBD\x9C"
    "Assistant\xEF\xBD\x9C>' + content + "
    "'<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}"
    "{%- endif %}{%- endfor -%}"
    "{% if add_generation_prompt %}{{'<\xEF\xBD\x9C"
    "Assistant\xEF\xBD\x9C><think>\\n'}}"
    "{% endif %}";

// Reformats a template the way llama.cpp's copies differ from the HF one-liners: a newline and
// indentation after every tag, and spaces inside the delimiters.
std::string reformat(const std::string& jinja) {
  std::string out;
  for (std::size_t i = 0; i < jinja.size(); ++i) {
    out += jinja[i];
    const bool closes = i > 0 && (jinja[i] == '}' || jinja[i] == '%') && jinja[i - 1] != '{' &&
                        i + 1 < jinja.size() && jinja[i + 1] == '}';
    if (closes) {
      out += "}\n    ";
      ++i;
    }
  }
  return out;
}

std::optional<ChatTemplateKind> detect(const std::string& jinja) {
  return detect_chat_template(jinja);
}

TEST(ChatTemplateDetect, NormalizationDropsLayoutButKeepsStringLiterals) {
  EXPECT_EQ(normalize_jinja_for_markers("{{- \"a b\" + x }}\n  {% if y %}z w{% endif %}"),
            "{{-'a b'+x}}{%ify%}zw{%endif%}");
  EXPECT_EQ(normalize_jinja_for_markers("{# it's a comment #}{{ 'k' }}"), "{{'k'}}");
  EXPECT_EQ(normalize_jinja_for_markers("{{ 'two\nlines\t' }}"), "{{'two\\nlines\\t'}}");
  EXPECT_EQ(normalize_jinja_for_markers("{{ \"it\\\"s\" }}"), "{{'it\\\"s'}}");
  EXPECT_EQ(normalize_jinja_for_markers("{{ '}}' }}after"), "{{'}}'}}after");
}

TEST(ChatTemplateDetect, EachFamilySnippetIsRecognized) {
  EXPECT_EQ(detect(kLlama3), ChatTemplateKind::llama3);
  EXPECT_EQ(detect(kQwen2), ChatTemplateKind::qwen2);
  EXPECT_EQ(detect(kChatML), ChatTemplateKind::chatml);
  EXPECT_EQ(detect(kMistralV3), ChatTemplateKind::mistral_v3);
  EXPECT_EQ(detect(kR1), ChatTemplateKind::deepseek_r1_distill);
}

TEST(ChatTemplateDetect, ReformattedCopiesAreRecognizedAlike) {
  for (const auto& [jinja, kind] :
       {std::pair{kLlama3, ChatTemplateKind::llama3}, std::pair{kQwen2, ChatTemplateKind::qwen2},
        std::pair{kChatML, ChatTemplateKind::chatml},
        std::pair{kMistralV3, ChatTemplateKind::mistral_v3},
        std::pair{kR1, ChatTemplateKind::deepseek_r1_distill}}) {
    const std::string copy = reformat(jinja);
    EXPECT_NE(copy, jinja);
    EXPECT_EQ(normalize_jinja_for_markers(copy), normalize_jinja_for_markers(jinja));
    EXPECT_EQ(detect(copy), kind) << copy;
  }
}

TEST(ChatTemplateDetect, LookAlikesAreNotClaimed) {
  // Llama-3.2 prints today's date via strftime_now.
  EXPECT_EQ(detect(kLlama3 + "{%- set date_string = strftime_now(\"%d %b %Y\") %}"), std::nullopt);
  // Llama-3.0: no system block, so no knowledge-cutoff preamble.
  std::string llama30 = kLlama3;
  llama30.erase(llama30.find("{{- \"Cutting"), std::string("{{- \"Cutting Knowledge Date: "
                                                           "December 2023\\n\" }}\n")
                                                   .size());
  EXPECT_EQ(detect(llama30), std::nullopt);
  // Qwen3-style thinking.
  EXPECT_EQ(detect(kQwen2 + "{{- '<think>\\n\\n</think>\\n\\n' }}"), std::nullopt);
  // llama.cpp's edited R1-Distill copy.
  EXPECT_EQ(detect(kR1 + "{% if not enable_thinking %}{{- '</think>' -}}{% endif %}"),
            std::nullopt);
  // An R1 variant that closes the user turn with the EOS.
  std::string closed = kR1;
  const std::string user = "{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['content']}}";
  closed.replace(closed.find(user), user.size(),
                 "{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['content'] + "
                 "'<\xEF\xBD\x9C"
                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}");
  EXPECT_EQ(detect(closed), std::nullopt);
  // Mistral v1 spacing (" [INST] ... [/INST]") and the tekken one ("[INST]" without a space).
  std::string v1 = kMistralV3;
  for (std::size_t at = v1.find("\"[INST] \""); at != std::string::npos;
       at = v1.find("\"[INST] \"", at + 3)) {
    v1.replace(at, 9, "\" [INST] \"");
  }
  EXPECT_EQ(detect(v1), std::nullopt);
  std::string tekken = kMistralV3;
  for (std::size_t at = tekken.find("\"[INST] \""); at != std::string::npos;
       at = tekken.find("\"[INST] \"", at + 1)) {
    tekken.replace(at, 9, "\"[INST]\"");
  }
  EXPECT_EQ(detect(tekken), std::nullopt);
  // Mistral v7 system prompt block.
  EXPECT_EQ(detect(kMistralV3 + "{{ '[SYSTEM_PROMPT] ' + message['content'] }}"), std::nullopt);
  // A generic ChatML template without SmolLM2's default system turn.
  std::string generic = kChatML;
  generic.erase(generic.find("{% if loop.first"),
                generic.find("{{'<|im_start|>' + message") - generic.find("{% if loop.first"));
  EXPECT_EQ(detect(generic), std::nullopt);
}

TEST(ChatTemplateDetect, MarkersInsideCommentsDoNotCount) {
  EXPECT_EQ(detect("{# " + kQwen2 + " #}"), std::nullopt);
}

TEST(ChatTemplateDetect, TwoFamiliesAtOnceIsAmbiguous) {
  EXPECT_EQ(detect(kLlama3 + kMistralV3), std::nullopt);
}

TEST(ChatTemplateDetect, HostileOrEmptyInputIsNotRecognized) {
  EXPECT_EQ(detect(""), std::nullopt);
  EXPECT_EQ(detect("plain text, no tags"), std::nullopt);
  EXPECT_EQ(detect("{{"), std::nullopt);
  EXPECT_EQ(detect("{% '"), std::nullopt);
  EXPECT_EQ(detect("{{ \"unterminated \\"), std::nullopt);
  EXPECT_EQ(detect("{#"), std::nullopt);
  EXPECT_EQ(detect(std::string("\0\xFF{{\x80", 5)), std::nullopt);
  // A truncated family template is no longer that family.
  EXPECT_EQ(detect(kQwen2.substr(0, kQwen2.size() / 2)), std::nullopt);
}

}  // namespace
}  // namespace kvaudit::model
