// Unit tests of runners/model/chat/prompt_split beyond the HF golden cases: the no-template path,
// query-aware folding, the quirks kvpress's string split has, and the errors.
#include "runners/model/chat/prompt_split.h"

#include <gtest/gtest.h>

#include <string>

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

PromptSplitInput make_input(ChatTemplateKind kind, std::string_view context,
                            std::string_view question, std::string_view answer_prefix) {
  PromptSplitInput input;
  input.kind = kind;
  input.context = context;
  input.question = question;
  input.answer_prefix = answer_prefix;
  return input;
}

TEST(PromptSplit, NoTemplateIsBosContextThenNewline) {
  PromptSplitInput input = make_input(ChatTemplateKind::none, "Doc.", " Q?", "A:");
  input.options.bos_text = "<s>";
  const PromptParts parts = split_prompt(input);
  EXPECT_EQ(parts.prefix_plus_context, "<s>Doc.");
  EXPECT_EQ(parts.question, " Q?");
  EXPECT_EQ(parts.suffix_plus_answer_prefix, "\nA:");
  EXPECT_EQ(parts.joined(), "<s>Doc. Q?\nA:");
}

TEST(PromptSplit, QueryAwareFoldsTheQuestionIntoTheContext) {
  PromptSplitInput input = make_input(ChatTemplateKind::qwen2, "Doc.", " Q?", "A:");
  const PromptParts agnostic = split_prompt(input);
  input.visibility = QueryVisibility::query_aware;
  const PromptParts aware = split_prompt(input);
  EXPECT_EQ(aware.question, "");
  EXPECT_EQ(aware.prefix_plus_context, agnostic.prefix_plus_context + " Q?");
  EXPECT_EQ(aware.suffix_plus_answer_prefix, agnostic.suffix_plus_answer_prefix);
  EXPECT_EQ(aware.joined(), agnostic.joined());
  EXPECT_EQ(agnostic.suffix_plus_answer_prefix, "<|im_end|>\n<|im_start|>assistant\nA:");
}

TEST(PromptSplit, Llama3TrimsLeadingWhitespaceOfTheContextOnly) {
  const PromptParts parts =
      split_prompt(make_input(ChatTemplateKind::llama3, " \n Doc. \n", " Q? ", ""));
  const std::string header =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
      "December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user"
      "<|end_header_id|>\n\n";
  EXPECT_EQ(parts.prefix_plus_context, header + "Doc. \n");
  EXPECT_EQ(parts.question, " Q? ");
  EXPECT_EQ(parts.suffix_plus_answer_prefix,
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(PromptSplit, ContextEndingInHashesLosesThemToTheSuffixLikePythonSplit) {
  const PromptParts parts = split_prompt(make_input(ChatTemplateKind::chatml, "Sec ##", "Q", ""));
  EXPECT_EQ(parts.prefix_plus_context,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nSec ");
  EXPECT_EQ(parts.suffix_plus_answer_prefix, "##<|im_end|>\n<|im_start|>assistant\n");
}

TEST(PromptSplit, MultiByteContextWithATrailingHashSplitsLikePython) {
  // len() == 3 (7 bytes): kvpress uses 13 '#'; the context's own trailing '#' moves to the suffix.
  const PromptParts parts = split_prompt(
      make_input(ChatTemplateKind::mistral_v3, "\xE6\x9D\xB1\xE4\xBA\xAC#", "?", " Ans"));
  EXPECT_EQ(parts.prefix_plus_context, "<s>[INST] \xE6\x9D\xB1\xE4\xBA\xAC");
  EXPECT_EQ(parts.suffix_plus_answer_prefix, "#[/INST] Ans");
}

TEST(PromptSplit, SystemMessageGoesWhereTheTemplatePutsIt) {
  PromptSplitInput input = make_input(ChatTemplateKind::mistral_v3, "Doc.", "Q", "");
  input.system = "Sys.";
  EXPECT_EQ(split_prompt(input).prefix_plus_context, "<s>[INST] Sys.\n\nDoc.");
  input.kind = ChatTemplateKind::none;
  const auto call = [&] { split_prompt(input); };
  EXPECT_THROW(call(), ModelInputError);
}

TEST(PromptSplit, InvalidUtf8NamesTheField) {
  for (const char* field : {"context", "question", "answer_prefix", "system"}) {
    PromptSplitInput input = make_input(ChatTemplateKind::qwen2, "c", "q", "a");
    const std::string bad = "ok\xC0\xAF";
    const std::string_view f(field);
    if (f == "context") input.context = bad;
    if (f == "question") input.question = bad;
    if (f == "answer_prefix") input.answer_prefix = bad;
    if (f == "system") input.system = bad;
    try {
      split_prompt(input);
      ADD_FAILURE() << field << " was accepted";
    } catch (const ModelInputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(field) + " is not valid UTF-8 at byte 2"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(PromptSplit, RejectPolicyAppliesToTheContext) {
  PromptSplitInput input = make_input(ChatTemplateKind::llama3, "a <|eot_id|> b", "q", "");
  EXPECT_NO_THROW(split_prompt(input));
  input.options.control_token_literals = ControlTokenLiterals::reject;
  EXPECT_THROW(split_prompt(input), ModelInputError);
}

}  // namespace
}  // namespace kvaudit::model
