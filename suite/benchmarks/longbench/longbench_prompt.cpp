// LongBench prompt text and kvpress's split, filled like Python str.format (see
// longbench_prompt.h).
#include "suite/benchmarks/longbench/longbench_prompt.h"

#include <optional>
#include <string_view>

#include "suite/benchmarks/longbench/python_format.h"

namespace kvaudit::benchmarks {
namespace {

// The record's fields as str.format(**record) sees them; only the string fields and `length` are
// offered (no template uses answers or all_classes, and Python would print their repr).
FormatFieldLookup record_fields(const LongBenchRecord& record, const std::string& length_text) {
  return [&record, &length_text](std::string_view name) -> std::optional<std::string_view> {
    if (name == "input") return record.input;
    if (name == "context") return record.context;
    if (name == "dataset") return record.dataset;
    if (name == "language") return record.language;
    if (name == "_id") return record.id;
    if (name == "length") return length_text;
    return std::nullopt;
  };
}

}  // namespace

std::string format_longbench_prompt(const LongBenchRecord& record, const LongBenchTaskRef& task) {
  const std::string length_text = std::to_string(record.length);
  return python_format(task.spec->prompt_template, record_fields(record, length_text));
}

KvpressPromptText format_kvpress_split(const LongBenchRecord& record,
                                       const LongBenchTaskRef& task) {
  const std::string length_text = std::to_string(record.length);
  const FormatFieldLookup fields = record_fields(record, length_text);
  KvpressPromptText out;
  out.context = python_format(task.spec->kvpress_context_template, fields);
  const std::string_view suffix = task.spec->kvpress_input_suffix;
  if (suffix.empty()) {
    out.question = python_format(task.spec->kvpress_question_template, fields);
  } else {
    std::string_view input = record.input;
    if (input.ends_with(suffix)) input.remove_suffix(suffix.size());  // str.removesuffix
    out.question = python_format(task.spec->kvpress_question_template,
                                 [input](std::string_view name) -> std::optional<std::string_view> {
                                   if (name == "input") return input;
                                   return std::nullopt;
                                 });
  }
  out.answer_prefix = std::string(task.spec->kvpress_answer_prefix);
  return out;
}

}  // namespace kvaudit::benchmarks
