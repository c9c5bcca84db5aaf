// Strict reader of the official LongBench v1 data files (THUDM/LongBench data.zip: one JSONL file
// per task, "<dir>/<task>.jsonl"; LongBench-E files are "<dir>/<task>_e.jsonl"). Every line is one
// JSON object with exactly these fields (docs/design/benchmarks.md §LongBench data):
//
//   input        string (may be empty)          the question / query
//   context      string                         the long document
//   answers      non-empty array of strings     gold answers (metrics take the max over them)
//   length       integer >= 0                   words (English, code) or characters (Chinese)
//   dataset      string                         the task; must be the file's task (LongBench-E
//                                               files may say "<task>" or "<task>_e")
//   language     string                         "en", "zh" or "code"
//   all_classes  null, or array of strings      the label set; required (non-empty) for the
//                                               classification tasks trec and lsht
//   _id          non-empty string               unique within the file
//
// Anything else stops the load with kvaudit::InputError "<file>:<line>: <field>: <what is wrong>":
// a line that is not one JSON object, invalid UTF-8 (byte offset given), a missing, duplicated,
// unknown or mistyped field, a dataset that is not the file's task, a duplicate _id, an empty
// line inside the file, a line longer than the cap, a file larger than its cap or with no record.
// JSON nesting deeper than the format needs is refused while parsing, so hostile input cannot
// exhaust the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "suite/benchmarks/longbench/longbench_task.h"

namespace kvaudit::benchmarks {

struct LongBenchRecord {
  std::string input;
  std::string context;
  std::vector<std::string> answers;
  std::optional<std::vector<std::string>> all_classes;  // nullopt: null in the file
  std::int64_t length = 0;
  std::string dataset;
  std::string language;
  std::string id;        // "_id"
  std::size_t line = 0;  // 1-based line of the record in its file
};

struct LongBenchReadLimits {
  std::size_t max_line_bytes = std::size_t{64} << 20;  // generous: only bounds memory
  std::size_t max_file_bytes = std::size_t{1} << 30;
  std::size_t max_records = 100'000;  // official files hold 150..500
};

struct LongBenchTaskData {
  LongBenchTaskRef task;
  std::filesystem::path file;
  std::vector<LongBenchRecord> records;  // in file order
};

// Parses the text of one task file; `source` names it in messages (e.g. its path).
std::vector<LongBenchRecord> parse_longbench_jsonl(std::string_view text, std::string_view source,
                                                   const LongBenchTaskRef& task,
                                                   const LongBenchReadLimits& limits = {});

// Reads "<dir>/<task>.jsonl" for a task name such as "hotpotqa" or "qasper_e" (see
// resolve_longbench_task). A missing or unreadable file is an InputError naming the path.
LongBenchTaskData load_longbench_task(const std::filesystem::path& dir, std::string_view task,
                                      const LongBenchReadLimits& limits = {});

}  // namespace kvaudit::benchmarks
