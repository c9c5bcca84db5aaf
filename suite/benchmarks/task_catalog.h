// The tasks of each benchmark kind a manifest may name, with what each needs: its generation budget
// and any external data file. Sources: docs/design/benchmarks.md §RULER length fitting, §RULER
// tasks, §LongBench data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::benchmarks {

enum class BenchmarkKind { ruler, longbench };

// External data a RULER task reads (LongBench reads its own JSONL data directory).
enum class DataNeed { none, essay, squad, hotpotqa };

struct TaskSpec {
  std::string name;
  std::string family;  // ruler: niah, variable_tracking, ...; longbench: the metric
  int max_new_tokens;  // RULER tokens_to_generate; LongBench dataset2maxlen
  DataNeed data;
  bool english;  // LongBench: English task (the suite's default set)
};

// Whether a task's contexts carry several questions, i.e. whether the reuse protocol (one
// compression per context, each question answered on it; docs/design/reuse.md) applies: every
// LongBench task (its records grouped by identical context), and of RULER only niah_multiquery,
// whose multi-question form (suite/benchmarks/ruler/multi_question.h) asks one question per needle.
inline constexpr std::string_view kRulerMultiQuestionTask = "niah_multiquery";
constexpr bool has_reuse_form(BenchmarkKind kind, std::string_view task) {
  return kind == BenchmarkKind::longbench || task == kRulerMultiQuestionTask;
}

std::string_view kind_name(BenchmarkKind kind);
const std::vector<TaskSpec>& tasks_of(BenchmarkKind kind);
const TaskSpec* find_task(BenchmarkKind kind, std::string_view name);
// "a, b, c": every task name of a kind, for error messages.
std::string task_name_list(BenchmarkKind kind);

// The names of a comma-separated list ("a,b, c"), blanks around each trimmed, in order. Throws
// InputError naming `what` and the list for an empty name (e.g. "a,,b" or a trailing comma);
// duplicates are left to the caller.
std::vector<std::string_view> split_name_list(std::string_view text, std::string_view what);

}  // namespace kvaudit::benchmarks
