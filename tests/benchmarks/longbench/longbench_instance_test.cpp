// build_longbench_instance on every sample record: the LongBench-protocol prompt is pred.py's
// truncated prompt (checked against transformers' text in truncation_expected.json), wrapped in
// the chat template except for the six raw tasks; the kvpress split is the Python split of the same
// text with only the context's middle removed; lengths are the tokenizer's counts; limits too small
// to keep the question are refused with a message naming the record.
#include "suite/benchmarks/longbench/longbench_instance.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

#include "suite/benchmarks/longbench/longbench_prompt.h"
#include "base/errors.h"
#include "tests/benchmarks/longbench/longbench_test_paths.h"

namespace kvaudit::benchmarks {
namespace {

using model::ChatTemplateKind;

constexpr std::string_view kLlama3Tokenizer = "tests/golden/tokenizers/bpe_llama3/tokenizer.json";

std::unique_ptr<model::Tokenizer> load(std::string_view relative) {
  return model::load_tokenizer(testing::source_dir() / relative);
}

std::vector<LongBenchTaskData> all_samples() {
  std::vector<LongBenchTaskData> out;
  for (const auto& entry : std::filesystem::directory_iterator(testing::sample_data_dir())) {
    out.push_back(load_longbench_task(testing::sample_data_dir(), entry.path().stem().string()));
  }
  return out;
}

// transformers' truncated text for (tokenizer, task/_id, limit), or nullptr when not truncated.
const nlohmann::json* golden_case(std::string_view tokenizer, const std::string& task,
                                  const std::string& id, std::size_t limit) {
  static const nlohmann::json j =
      testing::read_json(testing::golden_dir() / "truncation_expected.json");
  for (const nlohmann::json& t : j["tokenizers"]) {
    if (t["tokenizer"] != tokenizer) continue;
    for (const nlohmann::json& c : t["cases"]) {
      if (c["file_task"] == task && c["_id"] == id && c["max_length"] == limit) return &c;
    }
  }
  return nullptr;
}

std::string template_head(const LongBenchTaskRef& task) {
  const std::string_view t = task.spec->kvpress_context_template;
  return std::string(t.substr(0, t.find("{context}")));
}

void check_instance_against_references(const LongBenchChatOptions& chat, std::size_t limit,
                                       std::size_t* truncated_count, std::size_t* refused_count) {
  const auto tokenizer = load(kLlama3Tokenizer);
  for (const LongBenchTaskData& data : all_samples()) {
    for (const LongBenchRecord& record : data.records) {
      SCOPED_TRACE(data.task.name + " " + record.id + " limit " + std::to_string(limit));
      const std::string full = format_longbench_prompt(record, data.task);
      const KvpressPromptText split = format_kvpress_split(record, data.task);
      const nlohmann::json* golden =
          golden_case(kLlama3Tokenizer, data.task.name, record.id, limit);
      ASSERT_NE(golden, nullptr);
      const bool truncated = golden->at("truncated").get<bool>();
      const std::string golden_text = truncated ? golden->at("text").get<std::string>() : full;
      const std::string tail = split.question + split.answer_prefix;
      if (!golden_text.ends_with(tail)) {
        // pred.py's tail half no longer holds the whole question: the split is refused.
        try {
          (void)build_longbench_instance(record, data.task, *tokenizer, chat, limit);
          ADD_FAILURE() << "built an instance whose question was truncated";
        } catch (const InputError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("record _id '" + record.id + "' (line "), std::string::npos) << what;
          EXPECT_NE(what.find("no longer ends with the question"), std::string::npos) << what;
        }
        ++*refused_count;
        continue;
      }
      const LongBenchInstance in =
          build_longbench_instance(record, data.task, *tokenizer, chat, limit);
      EXPECT_EQ(in.task, data.task.name);
      EXPECT_EQ(in.id, record.id);
      EXPECT_EQ(in.source_line, record.line);
      EXPECT_EQ(in.answers, record.answers);
      EXPECT_EQ(in.all_classes, record.all_classes);
      EXPECT_EQ(in.length, record.length);
      EXPECT_EQ(in.max_new_tokens, data.task.catalog->max_new_tokens);
      EXPECT_EQ(in.kvpress_max_new_tokens, data.task.catalog->max_new_tokens + 20);
      EXPECT_EQ(in.max_prompt_tokens, limit);
      // LongBench protocol.
      EXPECT_EQ(in.truncated, truncated);
      EXPECT_EQ(in.original_prompt_tokens, golden->at("original_tokens").get<std::size_t>());
      EXPECT_EQ(in.prompt, golden_text);
      const bool templated =
          chat.kind != ChatTemplateKind::none &&
          (chat.rule == LongBenchChatRule::always || data.task.spec->chat_template);
      EXPECT_EQ(in.chat_template_applied, templated);
      if (templated) {
        const std::array<model::ChatMessage, 1> turn = {
            model::ChatMessage{model::ChatRole::user, golden_text}};
        EXPECT_EQ(in.final_prompt, model::render_chat(chat.kind, turn, chat.render));
        EXPECT_FALSE(in.final_prompt_add_special_tokens);
        EXPECT_EQ(in.final_prompt_tokens,
                  tokenizer->encode(in.final_prompt, {.add_special_tokens = false}).size());
      } else {
        EXPECT_EQ(in.final_prompt, golden_text);
        EXPECT_TRUE(in.final_prompt_add_special_tokens);
        EXPECT_EQ(in.final_prompt_tokens, golden->at("retokenized_tokens").get<std::size_t>());
      }
      // kvpress split: question and answer prefix untouched, context = truncated text minus them.
      EXPECT_EQ(in.question, split.question);
      EXPECT_EQ(in.answer_prefix, split.answer_prefix);
      EXPECT_EQ(in.context + in.question + in.answer_prefix, golden_text);
      if (truncated) {
        EXPECT_LT(in.context.size(), split.context.size());
        // The head half keeps the instructions' start (at tiny limits it may end inside them).
        const std::string head = template_head(data.task);
        EXPECT_TRUE(in.context.starts_with(head.substr(0, 20))) << in.context.substr(0, 40);
        ++*truncated_count;
      } else {
        EXPECT_EQ(in.context, split.context);
      }
      model::PromptSplitInput input;
      input.kind = in.chat_template;
      input.context = in.context;
      input.question = in.question;
      input.answer_prefix = in.answer_prefix;
      input.options = chat.render;
      const model::PromptParts parts = model::split_prompt(input);
      EXPECT_EQ(in.split_parts.prefix_plus_context, parts.prefix_plus_context);
      EXPECT_EQ(in.split_parts.question, parts.question);
      EXPECT_EQ(in.split_parts.suffix_plus_answer_prefix, parts.suffix_plus_answer_prefix);
      const model::EncodeOptions plain{.add_special_tokens = false};
      EXPECT_EQ(in.split_context_tokens,
                tokenizer->encode(parts.prefix_plus_context, plain).size());
      EXPECT_EQ(in.split_question_tokens, tokenizer->encode(parts.question, plain).size());
      EXPECT_EQ(in.split_suffix_tokens,
                tokenizer->encode(parts.suffix_plus_answer_prefix, plain).size());
    }
  }
}

TEST(LongBenchInstance, UntruncatedWithLlama3TemplateAndLongBenchRule) {
  LongBenchChatOptions chat;
  chat.kind = ChatTemplateKind::llama3;
  std::size_t truncated = 0;
  std::size_t refused = 0;
  check_instance_against_references(chat, 4096, &truncated, &refused);
  EXPECT_EQ(truncated, 0u);
  EXPECT_EQ(refused, 0u);
}

TEST(LongBenchInstance, TruncatedWithChatmlAlwaysRule) {
  LongBenchChatOptions chat;
  chat.kind = ChatTemplateKind::chatml;
  chat.rule = LongBenchChatRule::always;
  std::size_t truncated = 0;
  std::size_t refused = 0;
  check_instance_against_references(chat, 400, &truncated, &refused);
  EXPECT_GT(truncated, 20u);
}

TEST(LongBenchInstance, TinyLimitWithoutTemplateRefusesWhereTheQuestionIsCut) {
  LongBenchChatOptions chat;  // none: pred.py's raw prompts; kvpress's BOS + context split
  chat.render.bos_text = "<|begin_of_text|>";
  std::size_t truncated = 0;
  std::size_t refused = 0;
  check_instance_against_references(chat, 151, &truncated, &refused);
  EXPECT_GT(truncated, 0u);
  EXPECT_GT(refused, 0u);
}

TEST(LongBenchInstance, ChatRuleNamesTheSixRawTasks) {
  const auto tokenizer = load(kLlama3Tokenizer);
  LongBenchChatOptions chat;
  chat.kind = ChatTemplateKind::qwen2;
  for (const LongBenchTaskData& data : all_samples()) {
    const LongBenchInstance in =
        build_longbench_instance(data.records.front(), data.task, *tokenizer, chat, 100000);
    const bool raw = data.task.spec->name == "trec" || data.task.spec->name == "triviaqa" ||
                     data.task.spec->name == "samsum" || data.task.spec->name == "lcc" ||
                     data.task.spec->name == "repobench-p";
    EXPECT_EQ(in.chat_template_applied, !raw) << data.task.name;
    EXPECT_EQ(in.chat_template, raw ? ChatTemplateKind::none : ChatTemplateKind::qwen2);
    EXPECT_EQ(in.final_prompt.starts_with("<|im_start|>system\n"), !raw) << data.task.name;
  }
  EXPECT_EQ(longbench_chat_rule_name(LongBenchChatRule::longbench), "longbench");
  EXPECT_EQ(longbench_chat_rule_name(LongBenchChatRule::always), "always");
}

TEST(LongBenchInstance, BadLimitsAndRejectedTextNameTheRecord) {
  const auto tokenizer = load(kLlama3Tokenizer);
  const LongBenchTaskData data = load_longbench_task(testing::sample_data_dir(), "narrativeqa");
  const LongBenchChatOptions chat;
  for (const std::size_t limit : {std::size_t{0}, std::size_t{1}}) {
    try {
      (void)build_longbench_instance(data.records[0], data.task, *tokenizer, chat, limit);
      FAIL();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("longbench task 'narrativeqa', record _id "
                                           "'kvaudit-narrativeqa-00' (line 1): the prompt limit"),
                std::string::npos)
          << e.what();
    }
  }
  // A control-token literal in the data under ControlTokenLiterals::reject.
  LongBenchRecord injected = data.records[0];
  injected.context += " <|im_end|> ";
  LongBenchChatOptions strict;
  strict.kind = ChatTemplateKind::chatml;
  strict.render.control_token_literals = model::ControlTokenLiterals::reject;
  try {
    (void)build_longbench_instance(injected, data.task, *tokenizer, strict, 100000);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("record _id 'kvaudit-narrativeqa-00'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("<|im_end|>"), std::string::npos) << e.what();
  }
}

TEST(LongBenchInstance, BuildsEveryRecordOfATaskInOrder) {
  const auto tokenizer = load(kLlama3Tokenizer);
  const LongBenchTaskData data = load_longbench_task(testing::sample_data_dir(), "qasper_e");
  const auto instances = build_longbench_instances(data, *tokenizer, {}, 100000);
  ASSERT_EQ(instances.size(), data.records.size());
  for (std::size_t i = 0; i < instances.size(); ++i) {
    EXPECT_EQ(instances[i].id, data.records[i].id);
    EXPECT_EQ(instances[i].task, "qasper_e");
    EXPECT_EQ(instances[i].max_new_tokens, 128);
  }
}

}  // namespace
}  // namespace kvaudit::benchmarks
