// JSONL lines of RULER instances (ruler_jsonl.h).
#include "suite/benchmarks/ruler/ruler_jsonl.h"

#include <nlohmann/json.hpp>

#include "suite/benchmarks/tokenizer_check.h"

namespace kvaudit::benchmarks::ruler {

std::string instance_json_line(const RulerInstance& instance, const InstanceCheck* check) {
  nlohmann::ordered_json j;
  j["task"] = instance.task;
  j["index"] = instance.index;
  j["seed"] = instance.seed;
  j["length"] = instance.length;
  j["context"] = instance.context;
  j["question"] = instance.question;
  j["answer_prefix"] = instance.answer_prefix;
  j["answers"] = instance.answers;
  j["max_new_tokens"] = instance.max_new_tokens;
  j["haystack_units"] = instance.haystack_units;
  j["haystack_unit"] = instance.haystack_unit;
  nlohmann::ordered_json g;
  g["tokenizer"] = instance.tokenizer;
  g["context_tokens"] = instance.context_tokens;
  g["question_tokens"] = instance.question_tokens;
  g["prompt_tokens"] = instance.prompt_tokens();
  g["total_tokens"] = instance.total_tokens();
  j["generation"] = std::move(g);
  if (check) {
    nlohmann::ordered_json c;
    c["tokenizer"] = check->tokenizer;
    c["limit"] = check->limit;
    c["context_tokens"] = check->tokens.context;
    c["question_tokens"] = check->tokens.question;
    c["prompt_tokens"] = check->tokens.prompt();
    c["total_tokens"] = check->total_tokens();
    c["fits"] = check->fits;
    c["reason"] = check->reason;
    j["check"] = std::move(c);
  } else {
    j["check"] = nullptr;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

}  // namespace kvaudit::benchmarks::ruler
