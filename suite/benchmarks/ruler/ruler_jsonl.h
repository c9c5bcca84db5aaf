// The JSONL form of generated RULER instances (`kvaudit generate ruler --out FILE.jsonl`;
// docs/CLI.md): one JSON object per line, keys always in this order:
//   task, index, seed, length, context, question, answer_prefix, answers, max_new_tokens,
//   haystack_units, haystack_unit, generation {tokenizer, context_tokens, question_tokens,
//   prompt_tokens, total_tokens}, check {tokenizer, limit, context_tokens, question_tokens,
//   prompt_tokens, total_tokens, fits, reason}
// "check" (the tokenizer check's verdict for the evaluated tokenizer, tokenizer_check.h) is null
// when no check ran. Same inputs -> byte-identical lines.
#pragma once

#include <string>

#include "suite/benchmarks/ruler/ruler_instance.h"

namespace kvaudit::benchmarks {
struct InstanceCheck;
}

namespace kvaudit::benchmarks::ruler {

// One line, without the trailing newline.
std::string instance_json_line(const RulerInstance& instance, const InstanceCheck* check);

}  // namespace kvaudit::benchmarks::ruler
