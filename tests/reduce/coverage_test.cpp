// Coverage: missing cells are listed and make every number from their group partial; exclusions
// shrink n without making numbers partial; failed cells are reported and counted as certification
// violations; records that contradict their cell are refused; unexpected and duplicate records are
// listed.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/shard_writer.h"
#include "suite/reduce/markdown_table.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

SyntheticConfig small() {
  SyntheticConfig c;
  c.tasks = {"cwe", "niah_single_1", "vt"};
  c.instances = 20;
  c.calibration = 8;
  c.test = 8;
  c.bootstrap_resamples = 500;
  return c;
}

const Table& table(const ReduceResult& r, const std::string& id) {
  for (const auto& t : r.tables)
    if (t.id == id) return t;
  throw std::runtime_error("no table " + id);
}

std::string cell(const Table& t, std::size_t row, const std::string& column) {
  const Value& v = t.rows[row][t.column_index(column)];
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* n = std::get_if<std::int64_t>(&v)) return std::to_string(*n);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v)) return format_exact(*d);
  return "";
}

TEST(Coverage, MissingCellsAreListedAndTheirNumbersMarkedPartial) {
  auto cfg = small();
  cfg.drop_method = "snapkv";
  cfg.drop_model = "model-b";
  const auto study = write_synthetic_study(fresh_test_dir(), cfg);
  const auto r = reduce_study(options_for(study));
  EXPECT_FALSE(r.complete());
  // 2 backends x 60 units x 3 budgets x 2 protocols.
  EXPECT_EQ(r.coverage.total.missing, 2 * 60 * 3 * 2);
  EXPECT_EQ(table(r, "missing_cells").rows.size(), 720u);
  const Table& gap = table(r, "protocol_gap");
  std::size_t partial = 0;
  for (std::size_t i = 0; i < gap.rows.size(); ++i) {
    const bool is_partial = cell(gap, i, "partial") == "true";
    const bool dropped = cell(gap, i, "model") == "model-b" && cell(gap, i, "method") == "snapkv";
    EXPECT_EQ(is_partial, dropped) << i;
    if (dropped) {
      EXPECT_EQ(cell(gap, i, "n"), "0");  // no pair left
    }
    partial += is_partial ? 1 : 0;
  }
  EXPECT_EQ(partial, 2u * 3u);  // backend x budget
  // Pooled snapkv rows are partial too; the certification of snapkv on model-b imputes violations.
  const Table& pooled = table(r, "protocol_gap_pooled");
  for (std::size_t i = 0; i < pooled.rows.size(); ++i)
    EXPECT_EQ(cell(pooled, i, "partial") == "true", cell(pooled, i, "method") == "snapkv");
  for (const auto& run : r.certification.runs) {
    const bool dropped =
        run.method == "snapkv" && r.study->manifest.models[run.model].name == "model-b";
    EXPECT_EQ(run.partial, dropped);
    if (dropped) {
      EXPECT_EQ(run.calibration_imputed, 3 * 8 * 3);  // tasks x calibration x candidates
      for (const auto& c : run.result.candidates) EXPECT_EQ(c.violations, run.result.n);
      EXPECT_FALSE(run.result.selected.has_value());
    }
  }
  // The report says so.
  const std::string md = read_text(r.report_dir / "report.md");
  EXPECT_NE(md.find("**PARTIAL.**"), std::string::npos);
  EXPECT_NE(md.find("720 are missing"), std::string::npos);
  EXPECT_NE(read_text(r.report_dir / "tables" / "missing_cells.csv").find("snapkv"),
            std::string::npos);
  // The Summary calls a sentence from a partial row partial, and only such a sentence.
  constexpr auto npos = std::string::npos;
  std::size_t checked = 0;
  for (const auto& s : r.summary) {
    bool partial_row = false;
    if (s.table_id == "certification")
      partial_row = s.text.find("(snapkv on") != npos && s.text.find("model model-b") != npos;
    else if (s.table_id == "protocol_gap_pooled")
      partial_row = s.text.find("gap is snapkv ") != npos;
    else if (s.table_id == "baseline_wins" || s.table_id == "protocol_gap")
      partial_row = true;  // snapkv rows on model-b (each protocol; the maximum's table)
    else
      continue;
    ++checked;
    EXPECT_EQ(s.text.find("partial") != npos, partial_row) << s.text;
    EXPECT_NE(md.find(markdown_escape(s.text)), npos) << s.text;
  }
  EXPECT_EQ(checked, 2u + 2u + 4u);  // protocols, per budget and pooled, (block, model)
}

TEST(Coverage, ExclusionsShrinkNWithoutMakingNumbersPartial) {
  auto cfg = small();
  cfg.excluded_units = {"model-a/vt/3", "model-a/vt/7"};
  const auto study = write_synthetic_study(fresh_test_dir(), cfg);
  const auto r = reduce_study(options_for(study));
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.exclusions.excluded_units, 4);  // 2 instances x 2 backends
  const Table& ex = table(r, "exclusions");
  ASSERT_EQ(ex.rows.size(), 2u);  // per backend
  for (std::size_t i = 0; i < ex.rows.size(); ++i) {
    EXPECT_EQ(cell(ex, i, "model"), "model-a");
    EXPECT_EQ(cell(ex, i, "task"), "vt");
    EXPECT_EQ(cell(ex, i, "instances_excluded"), "2");
    EXPECT_NE(cell(ex, i, "reason").find("tokenizer check"), std::string::npos);
  }
  for (const auto& row : r.accuracy.rows) {
    EXPECT_FALSE(row.partial());
    const bool hit = r.study->manifest.models[row.model].name == "model-a" &&
                     r.frame->tasks[row.task].name == "vt";
    EXPECT_EQ(row.n, hit ? 18 : 20);
    EXPECT_EQ(row.excluded, hit ? 2 : 0);
  }
  for (const auto& row : r.protocol_gap.per_budget.rows) {
    EXPECT_FALSE(row.pairs.partial());
    const bool model_a =
        r.study->manifest.models[static_cast<std::size_t>(row.key[0])].name == "model-a";
    EXPECT_EQ(row.result.instances, model_a ? 58 : 60);
  }
}

TEST(Coverage, FailedCellsAreReportedPartialAndViolations) {
  auto cfg = small();
  cfg.oom_method = "keydiff";
  cfg.oom_fraction = 0.05;
  const auto study = write_synthetic_study(fresh_test_dir(), cfg);
  const auto r = reduce_study(options_for(study));
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(r.coverage.total.missing, 0);
  EXPECT_GT(r.coverage.total.failed, 0);
  const Table& failed = table(r, "failed_cells");
  ASSERT_FALSE(failed.rows.empty());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < failed.rows.size(); ++i) {
    EXPECT_EQ(cell(failed, i, "status"), "oom");
    EXPECT_EQ(cell(failed, i, "method"), "keydiff");
    EXPECT_EQ(cell(failed, i, "first_error"), "CUDA out of memory (synthetic)");
    total += std::stoll(cell(failed, i, "cells"));
  }
  EXPECT_EQ(total, r.coverage.total.failed);
  for (const auto& run : r.certification.runs)
    if (run.method == "keydiff") {
      EXPECT_TRUE(run.partial && run.calibration_imputed > 0);
    }
}

// A shard of one extra record, written with the study's provenance.
void write_extra_shard(const SyntheticStudy& s, const records::CellRecord& record, int rank = 99) {
  records::ShardWriterOptions o;
  o.directory = s.results_dir / "shards";
  records::fill_process_provenance(o.provenance);
  o.provenance.manifest_sha256 = s.manifest_sha256;
  o.provenance.rank = rank;
  o.launch_pid = rank;
  records::ShardWriter w(o);
  w.append(record);
  w.close_and_publish();
}

TEST(Coverage, ContradictingRecordIsRefusedUnexpectedAndDuplicatesAreListed) {
  const auto study = write_synthetic_study(fresh_test_dir(), small());
  // A duplicate of an existing cell (same content) and a record of no cell.
  const auto shards = records::read_study(study.results_dir / "shards");
  records::CellRecord dup = shards.records.front();
  records::CellRecord stray = dup;
  stray.cell_id = 12345;
  write_extra_shard(study, dup, 99);
  write_extra_shard(study, stray, 98);
  const auto r = reduce_study(options_for(study));
  EXPECT_EQ(r.coverage.duplicates, 1u);
  EXPECT_EQ(r.coverage.unexpected, 1u);
  EXPECT_EQ(table(r, "unexpected_records").rows.size(), 1u);
  EXPECT_EQ(cell(table(r, "unexpected_records"), 0, "cell_id"), id_hex(12345));
  EXPECT_TRUE(r.complete());

  // A record whose model contradicts its cell id: refused, naming the cell and the field.
  const auto study2 = write_synthetic_study(fresh_test_dir("contradiction"), small());
  const auto listing = records::list_shards(study2.results_dir / "shards");
  ASSERT_FALSE(listing.published.empty());
  records::CellRecord bad = records::read_shard(listing.published.front()).records.front();
  std::filesystem::remove(listing.published.front());  // its cells are now missing ...
  bad.model = "model-z";                               // ... and one comes back wrong
  write_extra_shard(study2, bad);
  try {
    reduce_study(options_for(study2));
    FAIL() << "a contradicting record was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("has model 'model-z'"), std::string::npos) << what;
    EXPECT_NE(what.find(id_hex(bad.cell_id)), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(study2.results_dir / "report"));
}

}  // namespace
}  // namespace kvaudit::reduce::testing
