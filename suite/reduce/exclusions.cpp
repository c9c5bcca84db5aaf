// Exclusions by the tokenizer check and failed cells (see exclusions.h).
#include "suite/reduce/exclusions.h"

#include <map>
#include <set>
#include <tuple>

namespace kvaudit::reduce {
namespace {

std::string reason_of(const FrameCell& c) {
  if (c.record == nullptr) return "";
  if (c.record->error.empty()) return "(no reason recorded)";
  return c.record->error;
}

std::string status_of(const FrameCell& c) {
  if (c.record == nullptr) return "missing";
  if (c.record->status == records::CellStatus::ok) return "ok-without-score";
  return std::string(records::enum_name(c.record->status));
}

}  // namespace

ExclusionSummary summarize_exclusions(const StudyFrame& frame) {
  ExclusionSummary s;
  std::set<std::uint32_t> units;
  for (const auto& c : frame.cells) {
    if (c.state == CellState::excluded) {
      ++s.excluded_cells;
      units.insert(c.unit);
    } else if (c.state == CellState::failed) {
      ++s.failed_cells;
    }
  }
  s.excluded_units = static_cast<std::int64_t>(units.size());
  return s;
}

std::vector<Table> exclusion_tables(const StudyFrame& frame) {
  std::vector<Table> out;
  const manifest::Manifest& m = frame.manifest();
  {
    struct Count {
      std::int64_t cells = 0;
      std::set<std::uint32_t> units;
    };
    // (model, backend, task, reason)
    std::map<std::tuple<std::uint16_t, std::uint8_t, std::uint32_t, std::string>, Count> counts;
    for (const auto& c : frame.cells) {
      if (c.state != CellState::excluded) continue;
      auto& n = counts[{c.model, c.backend, c.task, reason_of(c)}];
      ++n.cells;
      n.units.insert(c.unit);
    }
    Table t;
    t.id = "exclusions";
    t.title = "Instances excluded (tokenizer check)";
    t.description =
        "Cells recorded with status excluded, per model, backend, task and reason: the evaluated "
        "tokenizer measured the final prompt and it did not fit (or the plan excluded the "
        "instance). Excluded instances leave every analysis; n shrinks and the numbers are not "
        "marked partial. instances_excluded counts units (one prefill each) of the task.";
    for (const char* name : {"model", "backend", "benchmark", "task"})
      t.add_column(name, ColumnType::text);
    t.add_column("instances_excluded", ColumnType::integer, 0, true, "instances excl.");
    t.add_column("instances_per_task", ColumnType::integer, 0, true, "of");
    t.add_column("cells_excluded", ColumnType::integer, 0, false);
    t.add_column("reason", ColumnType::text);
    for (const auto& [key, n] : counts) {
      const auto& [model, backend, task, reason] = key;
      const TaskInfo& ti = frame.tasks[task];
      t.rows.push_back({m.models[model].name,
                        std::string(manifest::kAttentionBackendNames[backend]),
                        m.benchmarks[ti.benchmark].name, ti.name,
                        static_cast<std::int64_t>(n.units.size()), ti.instances, n.cells, reason});
    }
    out.push_back(std::move(t));
  }
  {
    struct Count {
      std::int64_t cells = 0;
      std::string example;
    };
    std::map<std::tuple<std::string, std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t,
                        std::int16_t>,
             Count>
        counts;
    for (const auto& c : frame.cells) {
      if (c.state != CellState::failed) continue;
      auto& n = counts[{status_of(c), c.model, c.backend, c.benchmark, c.protocol, c.method}];
      if (n.cells++ == 0) n.example = reason_of(c);
    }
    Table t;
    t.id = "failed_cells";
    t.title = "Failed cells";
    t.description =
        "Cells recorded with status error, oom or abandoned (or ok without a score), per status "
        "and group, with the first error message. They are not used as utilities; every number "
        "computed from their group is marked partial, and certification counts them as "
        "violations.";
    for (const char* name : {"status", "model", "backend", "benchmark", "protocol", "method"})
      t.add_column(name, ColumnType::text);
    t.add_column("cells", ColumnType::integer);
    t.add_column("first_error", ColumnType::text, 0, false);
    for (const auto& [key, n] : counts) {
      const auto& [status, model, backend, benchmark, protocol, method] = key;
      t.rows.push_back(
          {status, m.models[model].name, std::string(manifest::kAttentionBackendNames[backend]),
           m.benchmarks[benchmark].name, std::string(manifest::kProtocolNames[protocol]),
           method < 0 ? std::string("full") : m.methods[static_cast<std::size_t>(method)].name,
           n.cells, n.example});
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
