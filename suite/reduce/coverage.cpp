// Coverage of the expected cells by the study's records (see coverage.h).
#include "suite/reduce/coverage.h"

#include <algorithm>

#include "suite/common/sha256.h"

namespace kvaudit::reduce {

void StateCounts::add(CellState s) {
  ++expected;
  switch (s) {
    case CellState::ok:
      ++ok;
      break;
    case CellState::excluded:
      ++excluded;
      break;
    case CellState::failed:
      ++failed;
      break;
    case CellState::missing:
      ++missing;
      break;
  }
}

Coverage compute_coverage(const StudyFrame& frame) {
  Coverage cov;
  for (std::size_t i = 0; i < frame.cells.size(); ++i) {
    const FrameCell& c = frame.cells[i];
    cov.total.add(c.state);
    cov.by_group[{c.model, c.backend, c.benchmark, c.protocol, c.method}].add(c.state);
    if (c.state == CellState::missing) cov.missing.push_back(i);
  }
  cov.complete = cov.missing.empty();
  cov.reuse = frame.has_reuse();
  cov.duplicates = frame.study->records.duplicates.size();
  cov.unexpected = frame.unexpected_records.size();
  cov.salvaged = frame.study->records.records.size() - frame.study->records.n_from_published;
  return cov;
}

void mark_sequentially_skipped(const StudyFrame& frame, const std::vector<std::size_t>& skipped,
                               Coverage& cov) {
  for (const std::size_t i : skipped) {
    const auto at = std::lower_bound(cov.missing.begin(), cov.missing.end(), i);
    if (at == cov.missing.end() || *at != i) continue;
    cov.missing.erase(at);
    cov.skipped.push_back(i);
    const FrameCell& c = frame.cells[i];
    StateCounts& g = cov.by_group[{c.model, c.backend, c.benchmark, c.protocol, c.method}];
    for (StateCounts* counts : {&cov.total, &g}) {
      --counts->missing;
      ++counts->skipped;
    }
  }
  std::sort(cov.skipped.begin(), cov.skipped.end());
  cov.complete = cov.missing.empty();
}

std::vector<Table> coverage_tables(const StudyFrame& frame, const Coverage& cov) {
  std::vector<Table> out;
  const manifest::Manifest& m = frame.manifest();
  {
    Table t;
    t.id = "coverage";
    t.title = "Coverage of the preregistered cells";
    t.description =
        "Every cell the manifest expands to, by model, backend, benchmark, protocol and method: "
        "how many are expected, recorded with a score (ok), excluded by the tokenizer check or "
        "the plan, failed (status error, oom or abandoned, or ok without a score) and missing "
        "(no record). A group with a missing or failed cell makes every number computed from it "
        "partial.";
    if (cov.reuse)
      t.description += " A reuse cell counts once per question of its context (one record each).";
    for (const char* name : {"model", "backend", "benchmark", "protocol", "method"})
      t.add_column(name, ColumnType::text);
    for (const char* name : {"expected", "ok", "excluded", "failed", "missing"})
      t.add_column(name, ColumnType::integer);
    // Studies with sequential calibration: the cells it did not need, after `missing`.
    const bool any_skipped = !cov.skipped.empty();
    if (any_skipped) {
      t.description +=
          " skipped: cells a sequential certification block did not need (its candidate's "
          "anytime-valid test had decided; docs/design/sequential.md); they are not missing, "
          "but the groups they belong to are partial for the other analyses.";
      t.add_column("skipped", ColumnType::integer);
    }
    t.partial_column = static_cast<int>(t.add_column("incomplete", ColumnType::flag));
    for (const auto& [key, counts] : cov.by_group) {
      const auto& [model, backend, benchmark, protocol, method] = key;
      std::vector<Value> row{
          m.models[model].name,
          std::string(manifest::kAttentionBackendNames[backend]),
          m.benchmarks[benchmark].name,
          std::string(manifest::kProtocolNames[protocol]),
          method < 0 ? std::string("full") : m.methods[static_cast<std::size_t>(method)].name,
          counts.expected,
          counts.ok,
          counts.excluded,
          counts.failed,
          counts.missing};
      if (any_skipped) row.emplace_back(counts.skipped);
      row.emplace_back(counts.missing + counts.failed > 0);
      t.rows.push_back(std::move(row));
    }
    t.add_attribute("expected_cells", std::to_string(cov.total.expected));
    t.add_attribute("missing_cells", std::to_string(cov.total.missing));
    if (any_skipped) t.add_attribute("skipped_cells", std::to_string(cov.total.skipped));
    t.add_attribute("complete", cov.complete ? "true" : "false");
    t.markdown_row_limit = 80;
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "missing_cells";
    t.title = "Missing cells";
    t.description =
        "Every expected cell that no published shard (nor, with --salvage, any unpublished "
        "shard) holds. Run `kvaudit run` again to fill them: it resumes from the published "
        "shards.";
    for (const char* name : {"cell_id", "model", "backend", "benchmark", "task"})
      t.add_column(name, ColumnType::text);
    t.add_column("instance", ColumnType::integer);
    for (const char* name : {"protocol", "method", "budget"}) t.add_column(name, ColumnType::text);
    // Reuse studies: a reuse cell has one row per question ("" when its question count is
    // unknown: no record of its context).
    const bool reuse = frame.has_reuse();
    if (reuse) {
      t.add_column("question", ColumnType::text);
      t.description += " Reuse cells: one row per missing question of the context.";
    }
    for (std::size_t i : cov.missing) {
      const FrameCell& c = frame.cells[i];
      t.rows.push_back({id_hex(c.cell_id), frame.model_name(c), frame.backend_name(c),
                        frame.benchmark_name(c), frame.tasks[c.task].name, c.instance,
                        frame.protocol_name(c), frame.method_name(c),
                        frame.budgets[c.budget].label});
      if (reuse)
        t.rows.back().emplace_back(!is_reuse(c) || c.n_questions > 0
                                       ? std::to_string(c.question) + " of " +
                                             std::to_string(std::max(c.n_questions, 1u))
                                       : std::string("all (count unknown)"));
    }
    t.markdown_row_limit = 40;
    t.write_latex = false;
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "duplicate_cells";
    t.title = "Cells recorded in more than one published shard";
    t.description =
        "Each is counted once: the record of the first shard in name order is used, the other "
        "is ignored.";
    for (const char* name : {"cell_id", "kept_shard", "ignored_shard"})
      t.add_column(name, ColumnType::text);
    for (const auto& d : frame.study->records.duplicates)
      t.rows.push_back({id_hex(d.cell_id), d.first_file.filename().string(),
                        d.duplicate_file.filename().string()});
    t.write_latex = false;
    t.markdown_row_limit = 20;
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "unexpected_records";
    t.title = "Records of cells the manifest does not expand to";
    t.description =
        "Used nowhere. They carry the study's manifest hash, so they point to a bug "
        "in the writer or to hand-made shards.";
    for (const char* name : {"cell_id", "model", "task", "method"})
      t.add_column(name, ColumnType::text);
    t.add_column("instance", ColumnType::integer);
    for (std::size_t ri : frame.unexpected_records) {
      const auto& r = frame.study->records.records[ri];
      t.rows.push_back(
          {id_hex(r.cell_id), r.model, r.task, r.method, static_cast<std::int64_t>(r.instance)});
    }
    t.write_latex = false;
    t.markdown_row_limit = 20;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
