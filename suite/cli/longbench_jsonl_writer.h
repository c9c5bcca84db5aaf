// The JSONL form of built LongBench instances (`kvaudit generate longbench --out FILE.jsonl`;
// docs/CLI.md): one JSON object per line, keys always in this order:
//   task, dataset, _id, line, index, length, answers, all_classes, max_new_tokens,
//   kvpress_max_new_tokens, chat_template, chat_template_applied, chat_rule,
//   context, question, answer_prefix, prompt, prompt_add_special_tokens,
//   tokens {tokenizer, max_prompt_tokens, original_prompt, final_prompt, truncated,
//           split_context, split_question, split_suffix}
// where context | question | answer_prefix is kvpress's split (the context middle-truncated when
// the prompt was), prompt is the LongBench-protocol prompt as fed (middle-truncated, then wrapped
// in the chat template when chat_template_applied; tokenized with added special tokens iff
// prompt_add_special_tokens), and the token counts are those of
// suite/benchmarks/longbench/longbench_instance.h (docs/design/benchmarks.md §LongBench
// truncation, §Tokenizer check).
// Same inputs -> byte-identical lines.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "suite/benchmarks/longbench/longbench_instance.h"

namespace kvaudit::cli {

// One line, without the trailing newline. `index` is the record's 0-based position in its file
// (what --first counts); `tokenizer` describes the tokenizer that measured it.
std::string longbench_instance_json_line(const benchmarks::LongBenchInstance& instance,
                                         std::size_t index, benchmarks::LongBenchChatRule rule,
                                         std::string_view tokenizer);

}  // namespace kvaudit::cli
