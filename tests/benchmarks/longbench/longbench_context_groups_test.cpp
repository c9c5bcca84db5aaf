// LongBench records and instances grouped by shared context for the reuse protocol
// (suite/benchmarks/longbench/context_groups.h): order of first appearance with non-adjacent
// members, the bundled sample files (no shared context: every group is a singleton), instances
// whose truncated contexts differ, and the refusal of a group that mixes answer prefixes.
#include <gtest/gtest.h>

#include <cstdio>

#include "base/errors.h"
#include "suite/benchmarks/longbench/context_groups.h"
#include "tests/benchmarks/longbench/longbench_test_paths.h"

namespace kvaudit::benchmarks {
namespace {

std::vector<std::size_t> members(const LongBenchContextGroup& group) { return group.members; }

TEST(LongBenchContextGroups, RecordsGroupByExactContextInOrderOfFirstAppearance) {
  std::vector<LongBenchRecord> records(6);
  const char* contexts[] = {"paper A", "paper B", "paper A", "paper C", "paper A ", "paper B"};
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i].context = contexts[i];
    records[i].input = "question " + std::to_string(i);
  }
  const auto groups = group_records_by_context(records);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(members(groups[0]), (std::vector<std::size_t>{0, 2}));  // "paper A"
  EXPECT_EQ(members(groups[1]), (std::vector<std::size_t>{1, 5}));  // "paper B"
  EXPECT_EQ(members(groups[2]), (std::vector<std::size_t>{3}));     // "paper C"
  EXPECT_EQ(members(groups[3]), (std::vector<std::size_t>{4}));     // a trailing space differs
  EXPECT_TRUE(group_records_by_context({}).empty());
}

TEST(LongBenchContextGroups, BundledSampleFilesHaveNoSharedContext) {
  // The sample files are synthetic, three records per task: every context is its own group. This
  // is the evidence quoted in docs/design/reuse.md §Data; the official files are not bundled.
  for (const char* task :
       {"narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "gov_report",
        "qmsum", "multi_news", "trec", "triviaqa", "samsum", "passage_count",
        "passage_retrieval_en", "lcc", "repobench-p", "qasper_e"}) {
    const LongBenchTaskData data = load_longbench_task(testing::sample_data_dir(), task);
    const auto groups = group_records_by_context(data.records);
    EXPECT_EQ(groups.size(), data.records.size()) << task;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(members(groups[g]), (std::vector<std::size_t>{g})) << task;
    }
  }
}

TEST(LongBenchContextGroups, InstancesGroupByTheirSplitContextAndRefuseMixedPrefixes) {
  std::vector<LongBenchInstance> instances(4);
  for (std::size_t i = 0; i < instances.size(); ++i) {
    instances[i].task = "qasper";
    instances[i].id = "id" + std::to_string(i);
    instances[i].answer_prefix = "Answer:";
  }
  instances[0].context = "document";
  instances[1].context = "docu…ment";  // the same document, middle-truncated for a longer question
  instances[2].context = "document";
  instances[3].context = "other";
  const auto groups = group_instances_by_context(instances);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(members(groups[0]), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(members(groups[1]), (std::vector<std::size_t>{1}));
  EXPECT_EQ(members(groups[2]), (std::vector<std::size_t>{3}));

  instances[2].answer_prefix = "Short answer:";
  try {
    group_instances_by_context(instances);
    FAIL() << "a group mixing answer prefixes was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'id0' and 'id2'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("answer prefix"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::benchmarks
