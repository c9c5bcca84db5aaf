// The text of a LongBench prompt, before any tokenization or chat template:
//   * the LongBench protocol (THUDM/LongBench pred.py): prompt =
//   dataset2prompt[task].format(**record)
//   * kvpress's split (create_huggingface_dataset.py):
//       context  = context_prefix[task].format(**record)
//       question = question_template[task].format(input = record.input.removesuffix(suffix))
//                  for trec ("Type:"), triviaqa ("Answer:"), samsum ("Summary:"), else
//                  question_template[task].format(**record)
//       answer_prefix = answer_prefix.get(task, "")
// Formatting follows Python str.format (python_format.h): braces inside the record are data.
// For well-formed records context + question + answer_prefix equals the LongBench prompt; it
// differs where kvpress's tables do (trec/triviaqa/samsum inputs that lack the suffix, lcc records
// with a non-empty input, which LongBench's lcc template ignores).
#pragma once

#include <string>

#include "suite/benchmarks/longbench/longbench_jsonl.h"

namespace kvaudit::benchmarks {

// dataset2prompt[task].format(**record).
std::string format_longbench_prompt(const LongBenchRecord& record, const LongBenchTaskRef& task);

struct KvpressPromptText {
  std::string context;
  std::string question;
  std::string answer_prefix;

  std::string joined() const { return context + question + answer_prefix; }
};

// kvpress's context / question / answer prefix of the record.
KvpressPromptText format_kvpress_split(const LongBenchRecord& record, const LongBenchTaskRef& task);

}  // namespace kvaudit::benchmarks
