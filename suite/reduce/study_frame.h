// The study as the analyses see it: one row per expected record of the manifest's expansion, with
// the cell's dimensions as small integers (model, backend, benchmark, task, protocol, method,
// budget, instance, split, question), the record that covers it (matched by (cell_id, question))
// and its state. A cell of the other protocols has one row (question 0 of 1); a reuse cell has one
// row per question of its context (docs/design/reuse.md §Cells and records), k = the records'
// n_questions. A reuse cell without any record takes k from the records of another cell of the
// same unit (the same context, so the same questions); when no cell of the unit has a record, k is
// unknown and the cell is one missing row (question 0, n_questions 0), so coverage counts it once.
//
// States: ok (a record with status ok and a finite score), excluded (status excluded: the tokenizer
// check or the plan left the instance out, reason in the record's error), failed (status error,
// oom or abandoned, or status ok without a score), missing (no record). Records whose cell_id the
// manifest does not expand to are kept aside as unexpected. A record that contradicts its cell
// (model, task, backend, protocol, instance, split, or the method of a compressed cell), a
// question index ≥ n_questions, two records of one (cell, question), records of one cell or unit
// that disagree on n_questions, or a non-reuse record with a question other than 0 of 1 is an
// InputError naming the cell id and the field.
//
// The resampling unit of every paired analysis is the benchmark instance (benchmark, task,
// instance index): the same request under every model, backend, method and budget. Its stratum is
// the task, numbered globally (task_id) so that stratum ids are stable across comparisons. Under
// reuse the instance is the context and the pairs are (context, question); intervals involving a
// reuse row resample contexts (cluster bootstrap, paired_rows.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/records/cell_record.h"
#include "suite/reduce/study_loader.h"

namespace kvaudit::reduce {

enum class CellState : std::uint8_t { ok, excluded, failed, missing };
const char* cell_state_name(CellState s);

// The seven dimensions of a cell, as the manifest's families name them.
enum class Dim : std::uint8_t { model, backend, benchmark, task, protocol, method, budget };
inline constexpr int kDimCount = 7;
const char* dim_name(Dim d);
// Throws InputError for an unknown name.
Dim dim_from_name(const std::string& name);

// A budget as declared: its kind and value (full KV: kind none, value 0).
struct Budget {
  manifest::BudgetKind kind = manifest::BudgetKind::none;
  double value = 0;
  std::string label;  // "compression=0.5", "retention=0.8", "threshold=0.001", "none"
  // Compression (fraction removed) implied by the budget: value for compression, 1 − value for
  // retention, NaN for thresholds, 0 for full KV.
  double nominal_compression = 0;
};

struct FrameCell {
  std::uint64_t cell_id = 0;
  std::uint32_t unit = 0;  // index into Expansion::units
  std::uint16_t model = 0;
  std::uint8_t backend = 0;  // the attention backend's AttentionBackend value (base/)
  std::uint16_t benchmark = 0;
  std::uint32_t task = 0;     // global task id (index into StudyFrame::tasks)
  std::uint8_t protocol = 0;  // the Protocol value (base/protocol.h)
  std::int16_t method = -1;   // index into Manifest::methods; -1 = full KV
  std::uint16_t budget = 0;   // index into StudyFrame::budgets
  std::int64_t instance = 0;
  manifest::Split split = manifest::Split::none;
  std::uint32_t question = 0;     // the question's index within its context (reuse), else 0
  std::uint32_t n_questions = 1;  // the context's questions (reuse; 0: unknown), else 1
  CellState state = CellState::missing;
  records::CellStatus status = records::CellStatus::ok;     // the record's status (when present)
  double score = std::numeric_limits<double>::quiet_NaN();  // finite only when state is ok
  double realised_retention = std::numeric_limits<double>::quiet_NaN();
  const records::CellRecord* record = nullptr;
};

struct TaskInfo {
  std::uint16_t benchmark = 0;
  std::uint16_t task_in_benchmark = 0;
  std::string name;            // e.g. "niah_single_1"
  std::string qualified;       // "ruler-8k/niah_single_1"
  std::int64_t instances = 0;  // the benchmark's instances per task
};

struct StudyFrame {
  const LoadedStudy* study = nullptr;
  // In Expansion::cells order (sorted by cell id); a reuse cell's rows consecutive by question.
  std::vector<FrameCell> cells;
  std::vector<TaskInfo> tasks;
  std::vector<Budget> budgets;  // sorted by (kind, value); budgets[0] is "none" when present
  std::vector<std::size_t> unexpected_records;  // indices into study->records.records

  const manifest::Manifest& manifest() const { return study->manifest; }
  std::string model_name(const FrameCell& c) const;
  std::string backend_name(const FrameCell& c) const;
  std::string benchmark_name(const FrameCell& c) const;
  std::string protocol_name(const FrameCell& c) const;
  std::string method_name(const FrameCell& c) const;  // configuration name, or "full"
  // The catalogue id of the cell's method ("full" for full KV).
  std::string method_id(const FrameCell& c) const;
  // The value of one dimension as text (task: "benchmark/task").
  std::string dim_value(const FrameCell& c, Dim d) const;
  // The value of one dimension as an integer (for grouping).
  std::int64_t dim_code(const FrameCell& c, Dim d) const;
  // True for the trivial baselines of the best-of-3 anchor (random, knorm, streaming_llm).
  bool is_trivial_baseline(const FrameCell& c) const;
  // True when some row is a reuse cell's (reports then explain the context resampling).
  bool has_reuse() const;
};

// True for a row of a reuse cell.
bool is_reuse(const FrameCell& c);

// Matches records to cells; throws InputError for a record that contradicts its cell.
StudyFrame build_frame(const LoadedStudy& study);

}  // namespace kvaudit::reduce
