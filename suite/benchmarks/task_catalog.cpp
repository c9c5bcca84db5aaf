#include "suite/benchmarks/task_catalog.h"

#include "base/errors.h"

namespace kvaudit::benchmarks {
namespace {

const std::vector<TaskSpec>& ruler_tasks() {
  static const std::vector<TaskSpec> tasks = {
      {"niah_single_1", "niah", 128, DataNeed::none, true},
      {"niah_single_2", "niah", 128, DataNeed::essay, true},
      {"niah_single_3", "niah", 128, DataNeed::essay, true},
      {"niah_multikey_1", "niah", 128, DataNeed::essay, true},
      {"niah_multikey_2", "niah", 128, DataNeed::none, true},
      {"niah_multikey_3", "niah", 128, DataNeed::none, true},
      {"niah_multivalue", "niah", 128, DataNeed::essay, true},
      {"niah_multiquery", "niah", 128, DataNeed::essay, true},
      {"vt", "variable_tracking", 30, DataNeed::none, true},
      {"cwe", "common_words_extraction", 120, DataNeed::none, true},
      {"fwe", "freq_words_extraction", 50, DataNeed::none, true},
      {"qa_1", "qa", 32, DataNeed::squad, true},
      {"qa_2", "qa", 32, DataNeed::hotpotqa, true},
  };
  return tasks;
}

const std::vector<TaskSpec>& longbench_tasks() {
  static const std::vector<TaskSpec> tasks = {
      {"narrativeqa", "qa_f1_score", 128, DataNeed::none, true},
      {"qasper", "qa_f1_score", 128, DataNeed::none, true},
      {"multifieldqa_en", "qa_f1_score", 64, DataNeed::none, true},
      {"hotpotqa", "qa_f1_score", 32, DataNeed::none, true},
      {"2wikimqa", "qa_f1_score", 32, DataNeed::none, true},
      {"musique", "qa_f1_score", 32, DataNeed::none, true},
      {"gov_report", "rouge_score", 512, DataNeed::none, true},
      {"qmsum", "rouge_score", 512, DataNeed::none, true},
      {"multi_news", "rouge_score", 512, DataNeed::none, true},
      {"trec", "classification_score", 64, DataNeed::none, true},
      {"triviaqa", "qa_f1_score", 32, DataNeed::none, true},
      {"samsum", "rouge_score", 128, DataNeed::none, true},
      {"passage_count", "count_score", 32, DataNeed::none, true},
      {"passage_retrieval_en", "retrieval_score", 32, DataNeed::none, true},
      {"lcc", "code_sim_score", 64, DataNeed::none, true},
      {"repobench-p", "code_sim_score", 64, DataNeed::none, true},
      {"multifieldqa_zh", "qa_f1_zh_score", 64, DataNeed::none, false},
      {"dureader", "rouge_zh_score", 128, DataNeed::none, false},
      {"vcsum", "rouge_zh_score", 512, DataNeed::none, false},
      {"lsht", "classification_score", 64, DataNeed::none, false},
      {"passage_retrieval_zh", "retrieval_zh_score", 32, DataNeed::none, false},
  };
  return tasks;
}

}  // namespace

std::string_view kind_name(BenchmarkKind kind) {
  return kind == BenchmarkKind::ruler ? "ruler" : "longbench";
}

const std::vector<TaskSpec>& tasks_of(BenchmarkKind kind) {
  return kind == BenchmarkKind::ruler ? ruler_tasks() : longbench_tasks();
}

const TaskSpec* find_task(BenchmarkKind kind, std::string_view name) {
  for (const auto& t : tasks_of(kind)) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string task_name_list(BenchmarkKind kind) {
  std::string s;
  for (const auto& t : tasks_of(kind)) {
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

std::vector<std::string_view> split_name_list(std::string_view text, std::string_view what) {
  std::vector<std::string_view> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view name = text.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty()) {
      throw InputError(std::string(what) + " '" + std::string(text) + "' has an empty name");
    }
    names.push_back(name);
    start = end + 1;
  }
  return names;
}

}  // namespace kvaudit::benchmarks
