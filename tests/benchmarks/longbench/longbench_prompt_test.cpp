// The LongBench task table and prompt text against the upstream sources: the table's strings equal
// dataset2prompt.json and kvpress's three tables (extracted from the pinned commits by
// tools/golden/make_longbench_golden.py), dataset2maxlen equals the task catalogue, and every
// sample record renders exactly as Python's str.format (+ removesuffix) renders it.
#include "suite/benchmarks/longbench/longbench_prompt.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "suite/benchmarks/longbench/longbench_jsonl.h"
#include "suite/benchmarks/longbench/longbench_task.h"
#include "suite/benchmarks/task_catalog.h"
#include "tests/benchmarks/longbench/longbench_test_paths.h"

namespace kvaudit::benchmarks {
namespace {

const nlohmann::json& expected() {
  static const nlohmann::json j =
      testing::read_json(testing::golden_dir() / "templates_expected.json");
  return j;
}

TEST(LongBenchTaskTable, StringsEqualTheUpstreamFiles) {
  const nlohmann::json& e = expected();
  EXPECT_EQ(e["sources"]["THUDM/LongBench"], "2e00731f8d0b");
  EXPECT_EQ(e["sources"]["NVIDIA/kvpress"], "8bb29b9");
  ASSERT_EQ(longbench_task_specs().size(), e["dataset2prompt"].size());
  std::set<std::string> seen;
  for (const LongBenchTaskSpec& spec : longbench_task_specs()) {
    const std::string name(spec.name);
    seen.insert(name);
    SCOPED_TRACE(name);
    ASSERT_TRUE(e["dataset2prompt"].contains(name));
    EXPECT_EQ(spec.prompt_template, e["dataset2prompt"][name].get<std::string>());
    EXPECT_EQ(spec.kvpress_context_template, e["kvpress_context_prefix"][name].get<std::string>());
    EXPECT_EQ(spec.kvpress_question_template,
              e["kvpress_question_template"][name].get<std::string>());
    // kvpress: answer_prefix.get(task, "")
    const nlohmann::json& prefixes = e["kvpress_answer_prefix"];
    EXPECT_EQ(spec.kvpress_answer_prefix,
              prefixes.contains(name) ? prefixes[name].get<std::string>() : std::string());
  }
  EXPECT_EQ(seen.size(), longbench_task_specs().size()) << "duplicate task in the table";
}

TEST(LongBenchTaskTable, CatalogueAgreesWithDataset2maxlen) {
  const nlohmann::json& maxlen = expected()["dataset2maxlen"];
  ASSERT_EQ(tasks_of(BenchmarkKind::longbench).size(), maxlen.size());
  for (const TaskSpec& t : tasks_of(BenchmarkKind::longbench)) {
    ASSERT_TRUE(maxlen.contains(t.name)) << t.name;
    EXPECT_EQ(t.max_new_tokens, maxlen[t.name].get<int>()) << t.name;
    const LongBenchTaskRef ref = resolve_longbench_task(t.name);
    EXPECT_EQ(longbench_max_new_tokens(ref), t.max_new_tokens);
    EXPECT_EQ(kvpress_max_new_tokens(ref), t.max_new_tokens + 20);
  }
}

TEST(LongBenchTaskTable, ChatTemplateExceptionsAndLongBenchEAreThePublishedSets) {
  const std::set<std::string> raw = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"};
  const std::set<std::string> e_tasks = {"qasper",
                                         "multifieldqa_en",
                                         "hotpotqa",
                                         "2wikimqa",
                                         "gov_report",
                                         "multi_news",
                                         "trec",
                                         "triviaqa",
                                         "samsum",
                                         "passage_count",
                                         "passage_retrieval_en",
                                         "lcc",
                                         "repobench-p"};
  for (const LongBenchTaskSpec& spec : longbench_task_specs()) {
    const std::string name(spec.name);
    EXPECT_EQ(spec.chat_template, raw.count(name) == 0) << name;
    EXPECT_EQ(spec.has_e_variant, e_tasks.count(name) == 1) << name;
    const bool strips = name == "trec" || name == "triviaqa" || name == "samsum";
    EXPECT_EQ(!spec.kvpress_input_suffix.empty(), strips) << name;
  }
  EXPECT_EQ(resolve_longbench_task("trec").spec->kvpress_input_suffix, "Type:");
  EXPECT_EQ(resolve_longbench_task("triviaqa").spec->kvpress_input_suffix, "Answer:");
  EXPECT_EQ(resolve_longbench_task("samsum").spec->kvpress_input_suffix, "Summary:");
}

TEST(LongBenchPrompt, SampleRecordsRenderAsPythonStrFormat) {
  std::size_t checked = 0;
  std::size_t joined_equal = 0;
  for (const nlohmann::json& r : expected()["renders"]) {
    const std::string file_task = r["file_task"].get<std::string>();
    const LongBenchTaskData data = load_longbench_task(testing::sample_data_dir(), file_task);
    const std::string id = r["_id"].get<std::string>();
    const LongBenchRecord* record = nullptr;
    for (const LongBenchRecord& candidate : data.records) {
      if (candidate.id == id) record = &candidate;
    }
    ASSERT_NE(record, nullptr) << file_task << " " << id;
    SCOPED_TRACE(file_task + " " + id);
    const std::string prompt = format_longbench_prompt(*record, data.task);
    EXPECT_EQ(prompt, r["prompt"].get<std::string>());
    const KvpressPromptText split = format_kvpress_split(*record, data.task);
    EXPECT_EQ(split.context, r["context"].get<std::string>());
    EXPECT_EQ(split.question, r["question"].get<std::string>());
    EXPECT_EQ(split.answer_prefix, r["answer_prefix"].get<std::string>());
    joined_equal += split.joined() == prompt ? 1 : 0;
    ++checked;
  }
  // 16 English tasks x 3 records + 2 LongBench-E records.
  EXPECT_EQ(checked, 50u);
  // The samples are well-formed, so kvpress's pieces rebuild LongBench's prompt exactly.
  EXPECT_EQ(joined_equal, checked);
}

LongBenchRecord record_with(std::string input, std::string context) {
  LongBenchRecord r;
  r.input = std::move(input);
  r.context = std::move(context);
  r.answers = {"a"};
  r.dataset = "x";
  r.language = "en";
  r.id = "id";
  return r;
}

TEST(LongBenchPrompt, KvpressSplitEdgeCasesFollowPython) {
  // trec input without the "Type:" suffix: removesuffix does nothing, kvpress still appends
  // "Type:" as the answer prefix, so its prompt differs from LongBench's.
  const LongBenchTaskRef trec = resolve_longbench_task("trec");
  const LongBenchRecord no_suffix = record_with("Question: why?", "C");
  const KvpressPromptText s = format_kvpress_split(no_suffix, trec);
  EXPECT_EQ(s.question, "Question: why?");
  EXPECT_EQ(s.answer_prefix, "Type:");
  EXPECT_EQ(format_longbench_prompt(no_suffix, trec),
            "Please determine the type of the question below. Here are some examples of "
            "questions.\n\nC\nQuestion: why?");
  // Only one trailing suffix is removed ("Type:Type:".removesuffix("Type:") == "Type:").
  EXPECT_EQ(format_kvpress_split(record_with("Q\nType:Type:", "C"), trec).question, "Q\nType:");
  // lcc: LongBench's template has no {input}; kvpress's question is "{input}".
  const LongBenchTaskRef lcc = resolve_longbench_task("lcc");
  const LongBenchRecord code = record_with("tail()\n", "def f():\n    return {'a': 1}\n");
  EXPECT_EQ(format_longbench_prompt(code, lcc),
            "Please complete the code given below. \ndef f():\n    return {'a': 1}\nNext line of "
            "code:\n");
  EXPECT_EQ(format_kvpress_split(code, lcc).question, "tail()\n");
  // lsht has no kvpress answer prefix (answer_prefix.get("lsht", "")).
  EXPECT_EQ(
      format_kvpress_split(record_with("x", "y"), resolve_longbench_task("lsht")).answer_prefix,
      "");
}

}  // namespace
}  // namespace kvaudit::benchmarks
