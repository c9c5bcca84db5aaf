// Fuzz target: the LongBench JSONL reader (suite/benchmarks/longbench/longbench_jsonl.h) for a QA
// task, a classification task and a LongBench-E file, then the prompt text and kvpress split of
// every record it accepts; also python_format with the input as a template. The reader must either
// accept the input or raise kvaudit::InputError, python_format either format or raise
// std::invalid_argument; anything else (crash, other exception, sanitizer report) is a bug.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "suite/benchmarks/longbench/longbench_jsonl.h"
#include "suite/benchmarks/longbench/longbench_prompt.h"
#include "suite/benchmarks/longbench/python_format.h"
#include "base/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace bench = kvaudit::benchmarks;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bench::LongBenchReadLimits limits;
  limits.max_line_bytes = 1 << 20;
  limits.max_records = 1000;
  for (const std::string_view task : {"narrativeqa", "trec", "qasper_e"}) {
    const bench::LongBenchTaskRef ref = bench::resolve_longbench_task(task);
    try {
      for (const bench::LongBenchRecord& record :
           bench::parse_longbench_jsonl(text, "fuzz.jsonl", ref, limits)) {
        (void)bench::format_longbench_prompt(record, ref);
        (void)bench::format_kvpress_split(record, ref).joined();
      }
    } catch (const kvaudit::InputError&) {
    }
  }
  try {
    (void)bench::python_format(text, [](std::string_view name) -> std::optional<std::string_view> {
      if (name == "context") return std::string_view("{input}");
      if (name == "input") return std::string_view("}{");
      return std::nullopt;
    });
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
