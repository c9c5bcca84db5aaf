// The strict LongBench JSONL reader: the sample files load field for field (compared with an
// independent nlohmann parse of the same lines), LongBench-E naming, and every malformed file is
// refused with "<file>:<line>: field '<name>': <what>" (or the line-level problem).
#include "suite/benchmarks/longbench/longbench_jsonl.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "tests/benchmarks/longbench/longbench_test_paths.h"

namespace kvaudit::benchmarks {
namespace {

using testing::malformed_dir;
using testing::sample_data_dir;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<nlohmann::json> json_lines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

const std::vector<std::string>& english_tasks() {
  static const std::vector<std::string> tasks = {"narrativeqa",
                                                 "qasper",
                                                 "multifieldqa_en",
                                                 "hotpotqa",
                                                 "2wikimqa",
                                                 "musique",
                                                 "gov_report",
                                                 "qmsum",
                                                 "multi_news",
                                                 "trec",
                                                 "triviaqa",
                                                 "samsum",
                                                 "passage_count",
                                                 "passage_retrieval_en",
                                                 "lcc",
                                                 "repobench-p"};
  return tasks;
}

TEST(LongBenchJsonl, SampleFilesLoadFieldForField) {
  for (const std::string& task : english_tasks()) {
    const LongBenchTaskData data = load_longbench_task(sample_data_dir(), task);
    EXPECT_EQ(data.task.name, task);
    EXPECT_FALSE(data.task.longbench_e);
    EXPECT_EQ(data.file, sample_data_dir() / (task + ".jsonl"));
    const std::vector<nlohmann::json> expected = json_lines(data.file);
    ASSERT_EQ(data.records.size(), expected.size()) << task;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const LongBenchRecord& r = data.records[i];
      const nlohmann::json& e = expected[i];
      EXPECT_EQ(r.line, i + 1);
      EXPECT_EQ(r.input, e["input"].get<std::string>());
      EXPECT_EQ(r.context, e["context"].get<std::string>());
      EXPECT_EQ(r.answers, e["answers"].get<std::vector<std::string>>());
      EXPECT_EQ(r.length, e["length"].get<std::int64_t>());
      EXPECT_EQ(r.dataset, task);
      EXPECT_EQ(r.language, e["language"].get<std::string>());
      EXPECT_EQ(r.id, e["_id"].get<std::string>());
      if (e["all_classes"].is_null()) {
        EXPECT_FALSE(r.all_classes.has_value()) << task;
      } else {
        ASSERT_TRUE(r.all_classes.has_value()) << task;
        EXPECT_EQ(*r.all_classes, e["all_classes"].get<std::vector<std::string>>());
      }
    }
  }
}

TEST(LongBenchJsonl, LongBenchEFileAcceptsBothDatasetSpellings) {
  const LongBenchTaskData data = load_longbench_task(sample_data_dir(), "qasper_e");
  EXPECT_TRUE(data.task.longbench_e);
  EXPECT_EQ(data.task.spec->name, "qasper");
  ASSERT_EQ(data.records.size(), 2u);
  EXPECT_EQ(data.records[0].dataset, "qasper_e");
  EXPECT_EQ(data.records[1].dataset, "qasper");
}

TEST(LongBenchJsonl, UnknownTaskNamesAreRefusedWithTheValidNames) {
  for (const char* bad :
       {"narrative_qa", "narrativeqa_e", "NarrativeQA", "", "_e", "niah_single_1"}) {
    try {
      (void)resolve_longbench_task(bad);
      FAIL() << bad;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("unknown task '" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("repobench-p"), std::string::npos) << what;
      EXPECT_NE(what.find("passage_count_e"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(resolve_longbench_task("lsht").catalog->family, "classification_score");
}

TEST(LongBenchJsonl, MissingFileIsNamed) {
  try {
    (void)load_longbench_task(sample_data_dir(), "dureader");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((sample_data_dir() / "dureader.jsonl").string()),
              std::string::npos)
        << e.what();
  }
}

struct MalformedCase {
  const char* name;
  const char* task;
  int line;              // 0: a file-level message without a line
  const char* contains;  // part of the message after "<file>:<line>: "
};

TEST(LongBenchJsonl, EveryMalformedFileNamesFileLineAndField) {
  const MalformedCase cases[] = {
      {"not_json", "narrativeqa", 2, "not valid JSON"},
      {"not_object", "narrativeqa", 1, "expected one JSON object per line, found array"},
      {"missing_answers", "narrativeqa", 2, "field 'answers': missing"},
      {"length_string", "narrativeqa", 1, "field 'length': expected an integer, found string"},
      {"length_float", "narrativeqa", 1,
       "field 'length': expected an integer, found a non-integer number"},
      {"length_negative", "narrativeqa", 1, "field 'length': negative (-3)"},
      {"answers_not_strings", "narrativeqa", 1,
       "field 'answers': element 1: expected a string, found number"},
      {"answers_empty", "narrativeqa", 1, "field 'answers': empty"},
      {"context_null", "narrativeqa", 1, "field 'context': expected a string, found null"},
      {"unknown_field", "narrativeqa", 1, "field 'pred': unknown field"},
      {"duplicate_field", "narrativeqa", 1, "field 'input' appears twice"},
      {"unknown_dataset", "narrativeqa", 1, "field 'dataset': unknown dataset 'narrative_qa'"},
      {"other_task_dataset", "narrativeqa", 2,
       "field 'dataset': 'hotpotqa' in the file of task 'narrativeqa'"},
      {"bad_language", "narrativeqa", 1, "field 'language': 'english' is not one of en, zh, code"},
      {"trec_without_classes", "trec", 1, "field 'all_classes': task 'trec' is scored by"},
      {"all_classes_string", "trec", 1,
       "field 'all_classes': expected an array of strings, found string"},
      {"duplicate_id", "narrativeqa", 3, "field '_id': 'kvaudit-narrativeqa-00' appears twice"},
      {"empty_id", "narrativeqa", 1, "field '_id': empty"},
      {"blank_line", "narrativeqa", 2, "empty line"},
      {"invalid_utf8", "narrativeqa", 2, "invalid UTF-8 at byte"},
      {"deep_nesting", "narrativeqa", 1, "JSON nested deeper than a LongBench record"},
      {"empty_file", "narrativeqa", 0, "no records (empty file)"},
  };
  std::size_t directories = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(malformed_dir())) {
    ++directories;
  }
  EXPECT_EQ(directories, std::size(cases)) << "a malformed sample without an expectation (or back)";
  for (const MalformedCase& c : cases) {
    const std::filesystem::path dir = malformed_dir() / c.name;
    const std::string file = (dir / (std::string(c.task) + ".jsonl")).string();
    try {
      (void)load_longbench_task(dir, c.task);
      ADD_FAILURE() << c.name << ": loaded without error";
    } catch (const InputError& e) {
      const std::string what = e.what();
      const std::string prefix =
          c.line > 0 ? file + ":" + std::to_string(c.line) + ": " : file + ": ";
      EXPECT_EQ(what.rfind(prefix, 0), 0u) << c.name << ": " << what;
      EXPECT_NE(what.find(c.contains), std::string::npos) << c.name << ": " << what;
    }
  }
}

LongBenchTaskRef narrativeqa() { return resolve_longbench_task("narrativeqa"); }

std::string first_sample_line() {
  const std::string text = slurp(sample_data_dir() / "narrativeqa.jsonl");
  return text.substr(0, text.find('\n'));
}

TEST(LongBenchJsonl, LineAndFileCapsAreEnforced) {
  const std::string line = first_sample_line();
  LongBenchReadLimits limits;
  limits.max_line_bytes = line.size() - 1;
  try {
    (void)parse_longbench_jsonl(line + "\n", "mem.jsonl", narrativeqa(), limits);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mem.jsonl:1: line of " + std::to_string(line.size()) +
                                         " bytes, more than the limit of " +
                                         std::to_string(line.size() - 1)),
              std::string::npos)
        << e.what();
  }
  limits = {};
  limits.max_file_bytes = line.size();
  EXPECT_THROW((void)parse_longbench_jsonl(line + "\n", "mem.jsonl", narrativeqa(), limits),
               InputError);
  limits = {};
  limits.max_records = 1;
  nlohmann::json other = nlohmann::json::parse(line);
  other["_id"] = "other";
  const std::string second = other.dump();
  try {
    (void)parse_longbench_jsonl(line + "\n" + second + "\n", "mem.jsonl", narrativeqa(), limits);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mem.jsonl:2: more than 1 records"), std::string::npos)
        << e.what();
  }
}

TEST(LongBenchJsonl, CrlfAndAMissingFinalNewlineAreAccepted) {
  const std::string line = first_sample_line();
  const auto crlf = parse_longbench_jsonl(line + "\r\n", "mem.jsonl", narrativeqa());
  const auto bare = parse_longbench_jsonl(line, "mem.jsonl", narrativeqa());
  ASSERT_EQ(crlf.size(), 1u);
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(crlf[0].context, bare[0].context);
  EXPECT_EQ(crlf[0].id, "kvaudit-narrativeqa-00");
}

TEST(LongBenchJsonl, EscapedBracesAndUnicodeSurviveParsing) {
  const std::string line =
      R"({"input": "{input} \u00e9\ud83d\udc4d", "context": "a\nb\t{{c}}", "answers": ["x"],)"
      R"( "length": 3, "dataset": "narrativeqa", "language": "en", "all_classes": null,)"
      R"( "_id": "u1"})";
  const auto records = parse_longbench_jsonl(line, "mem.jsonl", narrativeqa());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].input, "{input} \xC3\xA9\xF0\x9F\x91\x8D");
  EXPECT_EQ(records[0].context, "a\nb\t{{c}}");
  // A lone surrogate escape is not a Python-representable UTF-8 string either.
  std::string lone = line;
  lone.replace(lone.find("\\ud83d\\udc4d"), 12, "\\ud83d");
  EXPECT_THROW((void)parse_longbench_jsonl(lone, "mem.jsonl", narrativeqa()), InputError);
}

}  // namespace
}  // namespace kvaudit::benchmarks
