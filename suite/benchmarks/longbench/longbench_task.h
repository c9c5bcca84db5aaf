// The LongBench v1 task table: per task, the official prompt template, the chat-template rule and
// the kvpress context/question/answer-prefix split, plus task-name resolution (LongBench-E files
// "<task>_e.jsonl" use their base task's templates). Generation lengths (dataset2maxlen) and the
// metric live in the shared task catalogue (suite/benchmarks/task_catalog.h) and are read from it.
//
// Sources, reproduced character for character (tests/golden/longbench/templates_expected.json is
// extracted from the upstream files by tools/golden/make_longbench_golden.py and checked against
// this table):
//   * THUDM/LongBench @ 2e00731f8d0b, LongBench/config/dataset2prompt.json (prompt_template),
//     LongBench/pred.py (chat_template: build_chat is skipped for trec, triviaqa, samsum, lsht,
//     lcc, repobench-p), config/dataset2maxlen.json (task catalogue).
//   * NVIDIA/kvpress @ 8bb29b9, evaluation/benchmarks/longbench/create_huggingface_dataset.py:
//     context_prefix, question_template, answer_prefix (answer_prefix.get(task, ""): lsht has
//     none), and the `input.removesuffix(...)` of trec ("Type:"), triviaqa ("Answer:") and samsum
//     ("Summary:"); max_new_tokens = dataset2maxlen + 20.
//   * LongBench-E (13 English tasks, THUDM/LongBench README; kvpress's second task list).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "suite/benchmarks/task_catalog.h"

namespace kvaudit::benchmarks {

struct LongBenchTaskSpec {
  std::string_view name;             // dataset2prompt key, e.g. "narrativeqa"
  std::string_view prompt_template;  // dataset2prompt[name], filled with str.format(**record)
  bool chat_template;                // pred.py applies build_chat (false for the six raw tasks)
  bool has_e_variant;                // LongBench-E ships "<name>_e.jsonl"
  // kvpress's split. context = kvpress_context_template.format(**record);
  // question = kvpress_question_template.format(input = input.removesuffix(kvpress_input_suffix))
  // (a plain .format(**record) when the suffix is empty); answer prefix as is.
  std::string_view kvpress_context_template;
  std::string_view kvpress_question_template;
  std::string_view kvpress_answer_prefix;
  std::string_view kvpress_input_suffix;
};

// The 21 LongBench v1 tasks in dataset2prompt.json's order.
const std::vector<LongBenchTaskSpec>& longbench_task_specs();

// What a task name given by the user (manifest, CLI) refers to.
struct LongBenchTaskRef {
  const LongBenchTaskSpec* spec = nullptr;  // the base task's templates
  const TaskSpec* catalog = nullptr;        // its catalogue entry (metric, dataset2maxlen)
  bool longbench_e = false;                 // "<name>_e": the LongBench-E resampling
  std::string name;                         // as given, also the file stem: "<dir>/<name>.jsonl"
};

// Resolves "narrativeqa", "qasper_e", ... Throws kvaudit::InputError naming the valid task names
// (and the LongBench-E ones) for anything else.
LongBenchTaskRef resolve_longbench_task(std::string_view name);

// dataset2maxlen[task]: the generation budget of the LongBench protocol (pred.py).
int longbench_max_new_tokens(const LongBenchTaskRef& task);
// kvpress's budget for the same task: dataset2maxlen + 20.
int kvpress_max_new_tokens(const LongBenchTaskRef& task);

}  // namespace kvaudit::benchmarks
