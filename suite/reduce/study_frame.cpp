// Building the study frame: expected cells with their dimensions, records matched by cell id,
// cross-checks of every record against its cell (see study_frame.h).
#include "suite/reduce/study_frame.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::reduce {
namespace {

const char* const kDimNames[kDimCount] = {"model",    "backend", "benchmark", "task",
                                          "protocol", "method",  "budget"};

std::string budget_label(manifest::BudgetKind kind, double value) {
  if (kind == manifest::BudgetKind::none) return "none";
  return std::string(manifest::budget_kind_name(kind)) + "=" + manifest::format_number(value);
}

[[noreturn]] void contradiction(const LoadedStudy& s, std::uint64_t cell_id, const char* field,
                                const std::string& got, const std::string& want) {
  throw InputError((s.results_dir / "shards").string() + ": the record of cell " + id_hex(cell_id) +
                   " has " + field + " '" + got + "' but the manifest's cell has '" + want +
                   "'; the shards do not belong to this manifest's expansion");
}

// Checks a record against its row and sets the row's record, status, score and state.
void match_record(const LoadedStudy& study, const StudyFrame& f, const records::CellRecord& r,
                  FrameCell& fc) {
  if (r.model != f.model_name(fc))
    contradiction(study, r.cell_id, "model", r.model, f.model_name(fc));
  if (r.task != f.tasks[fc.task].name)
    contradiction(study, r.cell_id, "task", r.task, f.tasks[fc.task].name);
  if (records::enum_name(r.attention_backend) != f.backend_name(fc))
    contradiction(study, r.cell_id, "attention_backend",
                  std::string(records::enum_name(r.attention_backend)), f.backend_name(fc));
  if (records::enum_name(r.protocol) != f.protocol_name(fc))
    contradiction(study, r.cell_id, "protocol", std::string(records::enum_name(r.protocol)),
                  f.protocol_name(fc));
  if (static_cast<std::int64_t>(r.instance) != fc.instance)
    contradiction(study, r.cell_id, "instance", std::to_string(r.instance),
                  std::to_string(fc.instance));
  if (static_cast<int>(r.split) != static_cast<int>(fc.split))
    contradiction(study, r.cell_id, "split", std::string(records::enum_name(r.split)),
                  std::string(records::enum_name(static_cast<records::Split>(fc.split))));
  if (fc.method >= 0 && r.method != f.method_name(fc))
    contradiction(study, r.cell_id, "method", r.method, f.method_name(fc));
  fc.record = &r;
  fc.status = r.status;
  fc.realised_retention = r.realised_retention;
  switch (r.status) {
    case records::CellStatus::ok:
      if (std::isfinite(r.score)) {
        if (r.score < 0 || r.score > 1)
          throw InputError((study.results_dir / "shards").string() + ": the record of cell " +
                           id_hex(r.cell_id) + " has score " + manifest::format_number(r.score) +
                           "; reduce expects utilities in [0, 1] (docs/REPORT.md)");
        fc.state = CellState::ok;
        fc.score = r.score;
      } else {
        fc.state = CellState::failed;  // ok but not scored: cannot be used
      }
      break;
    case records::CellStatus::excluded:
      fc.state = CellState::excluded;
      break;
    case records::CellStatus::oom:
    case records::CellStatus::error:
    case records::CellStatus::abandoned:
      fc.state = CellState::failed;
      break;
  }
}

}  // namespace

const char* cell_state_name(CellState s) {
  switch (s) {
    case CellState::ok:
      return "ok";
    case CellState::excluded:
      return "excluded";
    case CellState::failed:
      return "failed";
    case CellState::missing:
      return "missing";
  }
  return "?";
}

const char* dim_name(Dim d) { return kDimNames[static_cast<int>(d)]; }

Dim dim_from_name(const std::string& name) {
  for (int i = 0; i < kDimCount; ++i)
    if (name == kDimNames[i]) return static_cast<Dim>(i);
  throw InputError("unknown dimension '" + name + "'");
}

std::string StudyFrame::model_name(const FrameCell& c) const {
  return manifest().models[c.model].name;
}
std::string StudyFrame::backend_name(const FrameCell& c) const {
  return std::string(attention_backend_name(static_cast<AttentionBackend>(c.backend)));
}
std::string StudyFrame::benchmark_name(const FrameCell& c) const {
  return manifest().benchmarks[c.benchmark].name;
}
std::string StudyFrame::protocol_name(const FrameCell& c) const {
  return std::string(kvaudit::protocol_name(static_cast<Protocol>(c.protocol)));
}
std::string StudyFrame::method_name(const FrameCell& c) const {
  return c.method < 0 ? "full" : manifest().methods[static_cast<std::size_t>(c.method)].name;
}
std::string StudyFrame::method_id(const FrameCell& c) const {
  return c.method < 0 ? "full" : manifest().methods[static_cast<std::size_t>(c.method)].method;
}

bool is_reuse(const FrameCell& c) {
  return c.protocol == static_cast<std::uint8_t>(Protocol::reuse);
}

bool StudyFrame::has_reuse() const {
  return std::any_of(cells.begin(), cells.end(), [](const FrameCell& c) { return is_reuse(c); });
}

bool StudyFrame::is_trivial_baseline(const FrameCell& c) const {
  if (c.method < 0) return false;
  const std::string& id = manifest().methods[static_cast<std::size_t>(c.method)].method;
  return id == "random" || id == "knorm" || id == "streaming_llm";
}

std::string StudyFrame::dim_value(const FrameCell& c, Dim d) const {
  switch (d) {
    case Dim::model:
      return model_name(c);
    case Dim::backend:
      return backend_name(c);
    case Dim::benchmark:
      return benchmark_name(c);
    case Dim::task:
      return tasks[c.task].qualified;
    case Dim::protocol:
      return protocol_name(c);
    case Dim::method:
      return method_name(c);
    case Dim::budget:
      return budgets[c.budget].label;
  }
  return "";
}

std::int64_t StudyFrame::dim_code(const FrameCell& c, Dim d) const {
  switch (d) {
    case Dim::model:
      return c.model;
    case Dim::backend:
      return c.backend;
    case Dim::benchmark:
      return c.benchmark;
    case Dim::task:
      return c.task;
    case Dim::protocol:
      return c.protocol;
    case Dim::method:
      return c.method;
    case Dim::budget:
      return c.budget;
  }
  return 0;
}

StudyFrame build_frame(const LoadedStudy& study) {
  const manifest::Manifest& m = study.manifest;
  const manifest::Expansion& ex = study.expansion;
  StudyFrame f;
  f.study = &study;

  // Global task ids: benchmarks in manifest order, tasks in their (sorted) order.
  std::vector<std::uint32_t> task_offset(m.benchmarks.size(), 0);
  for (std::size_t bi = 0; bi < m.benchmarks.size(); ++bi) {
    task_offset[bi] = static_cast<std::uint32_t>(f.tasks.size());
    const auto& b = m.benchmarks[bi];
    for (std::size_t ti = 0; ti < b.tasks.size(); ++ti) {
      f.tasks.push_back(TaskInfo{static_cast<std::uint16_t>(bi), static_cast<std::uint16_t>(ti),
                                 b.tasks[ti], b.name + "/" + b.tasks[ti], b.instances});
    }
  }

  // Distinct budgets.
  std::map<std::pair<int, double>, std::uint16_t> budget_index;
  for (const auto& c : ex.cells) budget_index[{static_cast<int>(c.budget_kind), c.budget}] = 0;
  for (auto& [key, index] : budget_index) {
    index = static_cast<std::uint16_t>(f.budgets.size());
    Budget b;
    b.kind = static_cast<manifest::BudgetKind>(key.first);
    b.value = key.second;
    b.label = budget_label(b.kind, b.value);
    switch (b.kind) {
      case manifest::BudgetKind::none:
        b.nominal_compression = 0;
        break;
      case manifest::BudgetKind::compression:
        b.nominal_compression = b.value;
        break;
      case manifest::BudgetKind::retention:
        b.nominal_compression = 1 - b.value;
        break;
      case manifest::BudgetKind::threshold:
        b.nominal_compression = std::nan("");
        break;
    }
    f.budgets.push_back(b);
  }

  // The records of each expected cell (indices into recs), and k per reuse unit.
  const auto& recs = study.records.records;
  std::vector<std::vector<std::size_t>> cell_records(ex.cells.size());
  std::map<std::uint32_t, std::pair<std::uint32_t, std::uint64_t>> unit_questions;  // k, cell id
  for (std::size_t ri = 0; ri < recs.size(); ++ri) {
    const records::CellRecord& r = recs[ri];
    const auto it =
        std::lower_bound(ex.cells.begin(), ex.cells.end(), r.cell_id,
                         [](const manifest::Cell& c, std::uint64_t id) { return c.id < id; });
    if (it == ex.cells.end() || it->id != r.cell_id) {
      f.unexpected_records.push_back(ri);
      continue;
    }
    cell_records[static_cast<std::size_t>(it - ex.cells.begin())].push_back(ri);
    if (it->protocol != Protocol::reuse) {
      if (r.question != 0 || r.n_questions != 1)
        contradiction(study, r.cell_id, "question",
                      std::to_string(r.question) + " of " + std::to_string(r.n_questions),
                      "0 of 1 (one question per cell outside the reuse protocol)");
      continue;
    }
    if (r.n_questions == 0 || r.question >= r.n_questions)
      throw InputError((study.results_dir / "shards").string() + ": the record of cell " +
                       id_hex(r.cell_id) + " has question " + std::to_string(r.question) +
                       " of n_questions " + std::to_string(r.n_questions) +
                       "; a question index must be below n_questions");
    const auto [at, fresh] = unit_questions.emplace(it->unit, std::pair{r.n_questions, r.cell_id});
    if (!fresh && at->second.first != r.n_questions)
      throw InputError((study.results_dir / "shards").string() + ": the records of cells " +
                       id_hex(at->second.second) + " and " + id_hex(r.cell_id) +
                       " (one context) disagree on n_questions (" +
                       std::to_string(at->second.first) + " vs " + std::to_string(r.n_questions) +
                       "); every cell of a reuse unit answers the same questions");
  }

  for (std::size_t i = 0; i < ex.cells.size(); ++i) {
    const auto& c = ex.cells[i];
    const auto& u = ex.units[c.unit];
    FrameCell fc;
    fc.cell_id = c.id;
    fc.unit = c.unit;
    fc.model = u.model;
    fc.backend = static_cast<std::uint8_t>(u.attention_backend);
    fc.benchmark = u.benchmark;
    fc.task = task_offset[u.benchmark] + u.task;
    fc.protocol = static_cast<std::uint8_t>(c.protocol);
    fc.method = c.method;
    fc.budget = budget_index.at({static_cast<int>(c.budget_kind), c.budget});
    fc.instance = u.instance;
    fc.split = u.split;
    if (c.protocol == Protocol::reuse) {
      const auto k = unit_questions.find(c.unit);
      fc.n_questions = k == unit_questions.end() ? 0 : k->second.first;
    }
    const std::size_t first = f.cells.size();
    for (std::uint32_t q = 0; q < std::max<std::uint32_t>(fc.n_questions, 1); ++q) {
      f.cells.push_back(fc);
      f.cells.back().question = q;
    }
    for (const std::size_t ri : cell_records[i]) {
      const records::CellRecord& r = recs[ri];
      FrameCell& row = f.cells[first + r.question];  // r.question < n_questions (checked above)
      if (row.record != nullptr)
        throw InputError((study.results_dir / "shards").string() + ": cell " + id_hex(r.cell_id) +
                         " has two records of question " + std::to_string(r.question) +
                         "; a (cell_id, question) pair is recorded once");
      match_record(study, f, r, row);
    }
  }
  return f;
}

}  // namespace kvaudit::reduce
