// Strict LongBench JSONL reader (see longbench_jsonl.h for the record format and the checks).
#include "suite/benchmarks/longbench/longbench_jsonl.h"

#include <array>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "runners/model/chat/python_str.h"
#include "base/errors.h"

namespace kvaudit::benchmarks {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 8> kFields = {"input",   "context",  "answers",     "length",
                                                     "dataset", "language", "all_classes", "_id"};
constexpr std::array<std::string_view, 3> kLanguages = {"en", "zh", "code"};
// Top-level object = depth 0, its values = 1, array elements = 2; one more level is still parsed
// so that a nested array gets a precise type error instead of a depth error.
constexpr int kMaxJsonDepth = 3;

std::string field_list() {
  std::string s;
  for (const std::string_view f : kFields) {
    if (!s.empty()) s += ", ";
    s += f;
  }
  return s;
}

// Where a message points: "<source>:<line>".
struct Location {
  std::string_view source;
  std::size_t line;

  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(std::string(source) + ":" + std::to_string(line) + ": " + std::string(what));
  }
  [[noreturn]] void fail_field(std::string_view field, std::string_view what) const {
    fail("field '" + std::string(field) + "': " + std::string(what));
  }
};

// Thrown from the parser callback; turned into an InputError with the location.
struct ParseRefusal {
  std::string what;
};

const json& require(const json& object, std::string_view field, const Location& at) {
  const auto it = object.find(std::string(field));
  if (it == object.end())
    at.fail_field(field, "missing (a LongBench record has " + field_list() + ")");
  return *it;
}

std::string require_string(const json& object, std::string_view field, const Location& at) {
  const json& value = require(object, field, at);
  if (!value.is_string())
    at.fail_field(field, std::string("expected a string, found ") + value.type_name());
  return value.get<std::string>();
}

std::vector<std::string> string_array(const json& value, std::string_view field,
                                      const Location& at) {
  if (!value.is_array()) {
    at.fail_field(field, std::string("expected an array of strings, found ") + value.type_name());
  }
  std::vector<std::string> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      at.fail_field(field, "element " + std::to_string(i) + ": expected a string, found " +
                               value[i].type_name());
    }
    out.push_back(value[i].get<std::string>());
  }
  return out;
}

bool dataset_matches_task(std::string_view dataset, const LongBenchTaskRef& task) {
  if (dataset == task.spec->name) return true;
  return task.longbench_e && dataset == task.name;
}

LongBenchRecord parse_record(std::string_view line_text, const Location& at,
                             const LongBenchTaskRef& task) {
  std::set<std::string> keys_seen;
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) throw ParseRefusal{"JSON nested deeper than a LongBench record"};
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_seen.insert(key).second) throw ParseRefusal{"field '" + key + "' appears twice"};
    }
    return true;
  };
  json object;
  try {
    object = json::parse(line_text.begin(), line_text.end(), guard);
  } catch (const ParseRefusal& refusal) {
    at.fail(refusal.what);
  } catch (const json::parse_error& e) {
    at.fail("not valid JSON: " + std::string(e.what()));
  }
  if (!object.is_object()) {
    at.fail(std::string("expected one JSON object per line, found ") + object.type_name());
  }
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const std::string_view f : kFields) known = known || key == f;
    if (!known) at.fail_field(key, "unknown field (a LongBench record has " + field_list() + ")");
  }

  LongBenchRecord record;
  record.line = at.line;
  record.input = require_string(object, "input", at);
  record.context = require_string(object, "context", at);

  record.answers = string_array(require(object, "answers", at), "answers", at);
  if (record.answers.empty()) at.fail_field("answers", "empty (a record needs a gold answer)");

  const json& length = require(object, "length", at);
  if (!length.is_number_integer()) {
    at.fail_field("length", std::string("expected an integer, found ") +
                                (length.is_number() ? "a non-integer number" : length.type_name()));
  }
  if (length.is_number_unsigned()) {
    const auto value = length.get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(INT64_MAX)) at.fail_field("length", "out of range");
    record.length = static_cast<std::int64_t>(value);
  } else {
    record.length = length.get<std::int64_t>();
  }
  if (record.length < 0)
    at.fail_field("length", "negative (" + std::to_string(record.length) + ")");

  record.dataset = require_string(object, "dataset", at);
  if (!dataset_matches_task(record.dataset, task)) {
    bool known = false;
    for (const LongBenchTaskSpec& spec : longbench_task_specs()) {
      known = known || record.dataset == spec.name ||
              (spec.has_e_variant && record.dataset == std::string(spec.name) + "_e");
    }
    if (!known) {
      at.fail_field("dataset", "unknown dataset '" + record.dataset + "'; LongBench tasks are: " +
                                   task_name_list(BenchmarkKind::longbench));
    }
    at.fail_field("dataset", "'" + record.dataset + "' in the file of task '" + task.name + "'");
  }

  record.language = require_string(object, "language", at);
  bool language_ok = false;
  for (const std::string_view l : kLanguages) language_ok = language_ok || record.language == l;
  if (!language_ok) {
    at.fail_field("language", "'" + record.language + "' is not one of en, zh, code");
  }

  const json& classes = require(object, "all_classes", at);
  if (!classes.is_null()) record.all_classes = string_array(classes, "all_classes", at);
  const bool classification = task.catalog->family == "classification_score";
  if (classification && (!record.all_classes || record.all_classes->empty())) {
    at.fail_field("all_classes", "task '" + task.name +
                                     "' is scored by classification_score and needs a non-empty "
                                     "list of class names");
  }

  record.id = require_string(object, "_id", at);
  if (record.id.empty()) at.fail_field("_id", "empty");
  return record;
}

}  // namespace

std::vector<LongBenchRecord> parse_longbench_jsonl(std::string_view text, std::string_view source,
                                                   const LongBenchTaskRef& task,
                                                   const LongBenchReadLimits& limits) {
  if (text.size() > limits.max_file_bytes) {
    throw InputError(std::string(source) + ": " + std::to_string(text.size()) +
                     " bytes, more than the limit of " + std::to_string(limits.max_file_bytes));
  }
  std::vector<LongBenchRecord> records;
  std::set<std::string> ids;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++line_number;
    const std::size_t end = text.find('\n', pos);
    std::string_view line =
        end == std::string_view::npos ? text.substr(pos) : text.substr(pos, end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    const Location at{source, line_number};
    if (line.size() > limits.max_line_bytes) {
      at.fail("line of " + std::to_string(line.size()) + " bytes, more than the limit of " +
              std::to_string(limits.max_line_bytes));
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
    if (line.empty()) at.fail("empty line (one JSON record per line, no blank lines)");
    if (const auto bad = model::first_invalid_utf8_byte(line)) {
      at.fail("invalid UTF-8 at byte " + std::to_string(*bad) + " of the line");
    }
    if (records.size() == limits.max_records) {
      at.fail("more than " + std::to_string(limits.max_records) + " records");
    }
    LongBenchRecord record = parse_record(line, at, task);
    if (!ids.insert(record.id).second) at.fail_field("_id", "'" + record.id + "' appears twice");
    records.push_back(std::move(record));
  }
  if (records.empty()) throw InputError(std::string(source) + ": no records (empty file)");
  return records;
}

LongBenchTaskData load_longbench_task(const std::filesystem::path& dir, std::string_view task,
                                      const LongBenchReadLimits& limits) {
  LongBenchTaskRef ref = resolve_longbench_task(task);
  std::filesystem::path file = dir / (ref.name + ".jsonl");
  const std::string shown = file.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw InputError(shown +
                     ": no such LongBench data file (expected one JSONL file per task, "
                     "named as in THUDM/LongBench data.zip)");
  }
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw InputError(shown + ": cannot read its size: " + ec.message());
  if (size > limits.max_file_bytes) {
    throw InputError(shown + ": " + std::to_string(size) + " bytes, more than the limit of " +
                     std::to_string(limits.max_file_bytes));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(shown + ": cannot open for reading");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.gcount() != static_cast<std::streamsize>(text.size())) {
    throw InputError(shown + ": read " + std::to_string(in.gcount()) + " of " +
                     std::to_string(size) + " bytes");
  }
  std::vector<LongBenchRecord> records = parse_longbench_jsonl(text, shown, ref, limits);
  return LongBenchTaskData{std::move(ref), std::move(file), std::move(records)};
}

}  // namespace kvaudit::benchmarks
