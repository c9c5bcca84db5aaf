// Builds a LongBench instance for both protocols (see longbench_instance.h).
#include "suite/benchmarks/longbench/longbench_instance.h"

#include <array>

#include "runners/model/model_error.h"
#include "suite/benchmarks/longbench/longbench_prompt.h"
#include "suite/benchmarks/longbench/middle_truncation.h"
#include "base/errors.h"

namespace kvaudit::benchmarks {
namespace {

std::string where(const LongBenchRecord& record, const LongBenchTaskRef& task) {
  return "longbench task '" + task.name + "', record _id '" + record.id + "' (line " +
         std::to_string(record.line) + ")";
}

std::size_t count_tokens(const model::Tokenizer& tokenizer, std::string_view text,
                         bool add_special_tokens) {
  return tokenizer.encode(text, {.add_special_tokens = add_special_tokens, .parse_special = true})
      .size();
}

}  // namespace

std::string_view longbench_chat_rule_name(LongBenchChatRule rule) {
  return rule == LongBenchChatRule::longbench ? "longbench" : "always";
}

LongBenchInstance build_longbench_instance(const LongBenchRecord& record,
                                           const LongBenchTaskRef& task,
                                           const model::Tokenizer& tokenizer,
                                           const LongBenchChatOptions& chat,
                                           std::size_t max_prompt_tokens) {
  if (max_prompt_tokens < 2) {
    throw InputError(where(record, task) + ": the prompt limit (max_prompt_tokens) is " +
                     std::to_string(max_prompt_tokens) + "; it must be at least 2");
  }
  LongBenchInstance out;
  out.task = task.name;
  out.dataset = record.dataset;
  out.id = record.id;
  out.source_line = record.line;
  out.answers = record.answers;
  out.all_classes = record.all_classes;
  out.length = record.length;
  out.max_new_tokens = longbench_max_new_tokens(task);
  out.kvpress_max_new_tokens = kvpress_max_new_tokens(task);
  out.max_prompt_tokens = max_prompt_tokens;
  out.chat_template_applied = chat.kind != model::ChatTemplateKind::none &&
                              (chat.rule == LongBenchChatRule::always || task.spec->chat_template);
  out.chat_template = out.chat_template_applied ? chat.kind : model::ChatTemplateKind::none;

  try {
    // LongBench protocol.
    const std::string full_prompt = format_longbench_prompt(record, task);
    const MiddleTruncation cut = middle_truncate(full_prompt, tokenizer, max_prompt_tokens);
    out.original_prompt_tokens = cut.original_tokens;
    out.truncated = cut.truncated;
    out.prompt = cut.text;
    model::RenderOptions render = chat.render;
    render.add_generation_prompt = true;
    if (out.chat_template_applied) {
      const std::array<model::ChatMessage, 1> turn = {
          model::ChatMessage{model::ChatRole::user, out.prompt}};
      out.final_prompt = model::render_chat(out.chat_template, turn, render);
      out.final_prompt_add_special_tokens = false;
    } else {
      out.final_prompt = out.prompt;
      out.final_prompt_add_special_tokens = true;
    }
    out.final_prompt_tokens =
        count_tokens(tokenizer, out.final_prompt, out.final_prompt_add_special_tokens);

    // kvpress split, truncated by the same rule.
    KvpressPromptText split = format_kvpress_split(record, task);
    const std::string joined = split.joined();
    const MiddleTruncation split_cut =
        joined == full_prompt ? cut : middle_truncate(joined, tokenizer, max_prompt_tokens);
    if (split_cut.truncated) {
      const std::string tail = split.question + split.answer_prefix;
      if (!split_cut.text.ends_with(tail)) {
        throw InputError(
            where(record, task) + ": after middle truncation to " +
            std::to_string(max_prompt_tokens) + " tokens (" +
            std::to_string(split_cut.original_tokens) +
            " before) the prompt no longer ends with the question and answer prefix, so it "
            "cannot be split into context and question; raise the limit (the last " +
            std::to_string(split_cut.kept_tokens_each_side) +
            " tokens must cover the question) or check that the tokenizer's decode reproduces "
            "the text");
      }
      split.context = split_cut.text.substr(0, split_cut.text.size() - tail.size());
    }
    out.context = std::move(split.context);
    out.question = std::move(split.question);
    out.answer_prefix = std::move(split.answer_prefix);

    model::PromptSplitInput input;
    input.kind = out.chat_template;
    input.context = out.context;
    input.question = out.question;
    input.answer_prefix = out.answer_prefix;
    input.visibility = model::QueryVisibility::query_agnostic;
    input.options = render;
    out.split_parts = model::split_prompt(input);
    out.split_context_tokens = count_tokens(tokenizer, out.split_parts.prefix_plus_context, false);
    out.split_question_tokens = count_tokens(tokenizer, out.split_parts.question, false);
    out.split_suffix_tokens =
        count_tokens(tokenizer, out.split_parts.suffix_plus_answer_prefix, false);
  } catch (const model::ModelInputError& e) {
    throw InputError(where(record, task) + ": " + e.what());
  }
  return out;
}

std::vector<LongBenchInstance> build_longbench_instances(const LongBenchTaskData& data,
                                                         const model::Tokenizer& tokenizer,
                                                         const LongBenchChatOptions& chat,
                                                         std::size_t max_prompt_tokens) {
  std::vector<LongBenchInstance> out;
  out.reserve(data.records.size());
  for (const LongBenchRecord& record : data.records) {
    out.push_back(build_longbench_instance(record, data.task, tokenizer, chat, max_prompt_tokens));
  }
  return out;
}

}  // namespace kvaudit::benchmarks
