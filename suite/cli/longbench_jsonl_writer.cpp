// JSONL lines of LongBench instances (longbench_jsonl_writer.h).
#include "suite/cli/longbench_jsonl_writer.h"

#include <nlohmann/json.hpp>

namespace kvaudit::cli {

std::string longbench_instance_json_line(const benchmarks::LongBenchInstance& instance,
                                         std::size_t index, benchmarks::LongBenchChatRule rule,
                                         std::string_view tokenizer) {
  nlohmann::ordered_json j;
  j["task"] = instance.task;
  j["dataset"] = instance.dataset;
  j["_id"] = instance.id;
  j["line"] = instance.source_line;
  j["index"] = index;
  j["length"] = instance.length;
  j["answers"] = instance.answers;
  if (instance.all_classes) {
    j["all_classes"] = *instance.all_classes;
  } else {
    j["all_classes"] = nullptr;
  }
  j["max_new_tokens"] = instance.max_new_tokens;
  j["kvpress_max_new_tokens"] = instance.kvpress_max_new_tokens;
  j["chat_template"] = std::string(model::chat_template_name(instance.chat_template));
  j["chat_template_applied"] = instance.chat_template_applied;
  j["chat_rule"] = std::string(benchmarks::longbench_chat_rule_name(rule));
  j["context"] = instance.context;
  j["question"] = instance.question;
  j["answer_prefix"] = instance.answer_prefix;
  j["prompt"] = instance.final_prompt;
  j["prompt_add_special_tokens"] = instance.final_prompt_add_special_tokens;
  nlohmann::ordered_json t;
  t["tokenizer"] = std::string(tokenizer);
  t["max_prompt_tokens"] = instance.max_prompt_tokens;
  t["original_prompt"] = instance.original_prompt_tokens;
  t["final_prompt"] = instance.final_prompt_tokens;
  t["truncated"] = instance.truncated;
  t["split_context"] = instance.split_context_tokens;
  t["split_question"] = instance.split_question_tokens;
  t["split_suffix"] = instance.split_suffix_tokens;
  j["tokens"] = std::move(t);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

}  // namespace kvaudit::cli
