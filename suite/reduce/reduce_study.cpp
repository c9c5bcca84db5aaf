// The reduce pipeline: load, check, analyse, write and publish the report (see reduce_study.h).
#include "suite/reduce/reduce_study.h"

#include <ctime>
#include <fstream>
#include <thread>

#include "base/errors.h"
#include "suite/common/build_info.h"
#include "suite/common/utc_time.h"
#include "suite/reduce/analysis_context.h"
#include "suite/reduce/cell_lookup.h"
#include "suite/reduce/cost_figures.h"
#include "suite/reduce/csv_writer.h"
#include "suite/reduce/gnuplot_runner.h"
#include "suite/reduce/latex_writer.h"
#include "suite/reduce/report_directory.h"
#include "suite/reduce/report_markdown.h"
#include "suite/reduce/summary_h5.h"

namespace kvaudit::reduce {
namespace {

// Wall-clock and process CPU time (all threads) per phase, logged as "<phase> (W s, cpu C s)".
class Stopwatch {
 public:
  Stopwatch(std::vector<PhaseTime>& out, std::ostream* log) : out_(out), log_(log) {}
  void lap(const std::string& phase) {
    const auto now = std::chrono::steady_clock::now();
    const std::clock_t cpu_now = std::clock();
    const double s = std::chrono::duration<double>(now - last_).count();
    const double cpu = static_cast<double>(cpu_now - last_cpu_) / CLOCKS_PER_SEC;
    last_ = now;
    last_cpu_ = cpu_now;
    out_.push_back({phase, s, cpu});
    if (log_ != nullptr)
      *log_ << "kvaudit reduce: " << phase << " (" << format_fixed(s, 2) << " s, cpu "
            << format_fixed(cpu, 2) << " s)\n";
  }

 private:
  std::vector<PhaseTime>& out_;
  std::ostream* log_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::clock_t last_cpu_ = std::clock();
};

template <typename Fn>
void write_stream(const std::filesystem::path& path, Fn fn) {
  std::ofstream out(path, std::ios::binary);
  fn(out);
  out.close();
  if (!out) throw InternalError("cannot write " + path.string());
}

}  // namespace

ReduceResult reduce_study(const ReduceOptions& options) {
  ReduceResult res;
  Stopwatch watch(res.timings, options.log);
  res.study = std::make_unique<LoadedStudy>(load_study(options.load));
  const LoadedStudy& study = *res.study;
  const manifest::Manifest& m = study.manifest;
  watch.lap("loaded the lock, the manifest (" + std::to_string(study.expansion.cells.size()) +
            " cells) and " + std::to_string(study.records.records.size()) + " records from " +
            std::to_string(study.records.published.size()) + " published shards");

  res.frame = std::make_unique<StudyFrame>(build_frame(study));
  const StudyFrame& frame = *res.frame;
  res.coverage = compute_coverage(frame);
  res.exclusions = summarize_exclusions(frame);
  // read_study names every unpublished shard not already republished, every unverified or
  // salvaged shard and orphan sidecars in its warnings.
  for (const auto& w : study.records.warnings) res.warnings.push_back(w);
  if (!study.records.retried.empty()) {
    res.warnings.push_back(std::to_string(study.records.retried.size()) +
                           " failed record(s) were replaced by a later attempt's records "
                           "(kvaudit run --retry-failed); the later ones are used");
  }
  watch.lap("coverage: " + std::to_string(res.coverage.total.ok) + " ok, " +
            std::to_string(res.coverage.total.excluded) + " excluded, " +
            std::to_string(res.coverage.total.failed) + " failed, " +
            std::to_string(res.coverage.total.missing) + " missing of " +
            std::to_string(res.coverage.total.expected));

  res.bootstrap.resamples = options.resamples.value_or(m.statistics.bootstrap_resamples);
  res.bootstrap.seed = options.seed.value_or(m.statistics.seed);
  res.bootstrap.threads = options.threads;
  res.bootstrap.alpha = m.statistics.alpha;
  if (options.resamples && *options.resamples != m.statistics.bootstrap_resamples)
    res.warnings.push_back("B = " + std::to_string(*options.resamples) +
                           " was set on the command line; the manifest preregistered B = " +
                           std::to_string(m.statistics.bootstrap_resamples));
  if (options.seed && *options.seed != m.statistics.seed)
    res.warnings.push_back("the bootstrap seed " + std::to_string(*options.seed) +
                           " was set on the command line; the manifest preregistered " +
                           std::to_string(m.statistics.seed));

  const CellLookup lookup(frame);
  const AnalysisContext ctx(frame, lookup, study.families, m.statistics.alpha, res.bootstrap);
  res.certification = compute_certification(ctx);
  watch.lap("certification: " + std::to_string(res.certification.runs.size()) + " (block, model)");
  // Cells a sequential calibration did not need are skipped, not missing.
  for (const auto& run : res.certification.runs) {
    if (!run.sequential_skipped.empty()) {
      mark_sequentially_skipped(frame, run.sequential_skipped, res.coverage);
    }
  }
  if (!res.coverage.skipped.empty()) {
    watch.lap("coverage: " + std::to_string(res.coverage.skipped.size()) +
              " of the missing cells were not needed by a sequential calibration (skipped); " +
              std::to_string(res.coverage.total.missing) + " missing");
    res.warnings.push_back(std::to_string(res.coverage.skipped.size()) +
                           " calibration cell(s) were not run by design: their candidates' "
                           "sequential calibration had decided (coverage: skipped)");
  }
  res.accuracy = compute_accuracy(ctx);
  watch.lap("accuracy: " + std::to_string(res.accuracy.rows.size()) + " rows");
  res.protocol_gap = compute_protocol_gap(ctx);
  watch.lap("protocol gap: " +
            std::to_string(res.protocol_gap.per_budget.rows.size() +
                           res.protocol_gap.pooled.rows.size()) +
            " paired comparisons, B = " + std::to_string(res.bootstrap.resamples));
  res.baseline_wins = compute_baseline_wins(ctx);
  watch.lap("baseline wins: " + std::to_string(res.baseline_wins.comparisons.rows.size()) +
            " paired comparisons");
  res.backend_confound = compute_backend_confound(ctx);
  watch.lap("backend confound: " + std::to_string(res.backend_confound.full_kv.rows.size()) +
            " paired comparisons");
  res.costs = compute_costs(ctx);
  watch.lap("costs: " + std::to_string(res.costs.rows.size()) + " rows, " +
            std::to_string(res.costs.costed_cells) + " of " + std::to_string(res.costs.ok_cells) +
            " scored cells with costs");

  // Tables in report order.
  auto append = [&](std::vector<Table> more) {
    for (auto& t : more) res.tables.push_back(std::move(t));
  };
  append(coverage_tables(frame, res.coverage));
  append(exclusion_tables(frame));
  append(certification_tables(ctx, res.certification));
  append(protocol_gap_tables(ctx, res.protocol_gap));
  append(baseline_win_tables(ctx, res.baseline_wins));
  append(backend_confound_tables(ctx, res.backend_confound));
  append(accuracy_tables(ctx, res.accuracy));
  append(cost_tables(ctx, res.costs));
  res.summary = report_summary(res.tables);

  // Provenance.
  const BuildInfo& bi = build_info();
  const std::string created = utc_now_iso8601();
  std::vector<std::pair<std::string, std::string>> provenance{
      {"study", m.study.name},
      {"manifest", study.manifest_file.string()},
      {"manifest_sha256", study.manifest_sha256},
      {"preregistration", study.lock_file.string()},
      {"records", std::to_string(study.records.records.size()) + " from " +
                      std::to_string(study.records.published.size()) + " published shards"},
      {"coverage", res.complete() ? "complete" : "partial"},
      {"bootstrap_resamples", std::to_string(res.bootstrap.resamples)},
      {"bootstrap_seed", std::to_string(res.bootstrap.seed)},
      {"rng", "philox4x32-10 keyed by (seed, stratum, replicate)"},
      {"quantile_rule", "Hyndman-Fan type 7 (numpy 'linear')"},
      {"alpha", format_exact(m.statistics.alpha)},
      {"kvaudit", bi.version + " (" + bi.git_commit + (bi.git_dirty == "true" ? ", dirty" : "") +
                      ", " + bi.build_type + ")"},
      {"created_utc", created},
  };

  ReportDirectory dir(study.results_dir);
  const auto root = dir.temp_path();
  std::filesystem::create_directories(root / "tables");
  for (const auto& t : res.tables) {
    write_stream(root / "tables" / (t.id + ".csv"), [&](std::ostream& o) { write_csv(o, t); });
    if (t.write_latex)
      write_stream(root / "tables" / (t.id + ".tex"), [&](std::ostream& o) { write_latex(o, t); });
  }
  write_summary_h5(root / "summary.h5", res.tables, provenance);
  write_stream(root / "summary.txt", [&](std::ostream& o) { o << summary_text(res.summary); });
  watch.lap("tables: " + std::to_string(res.tables.size()) + " (CSV, LaTeX, summary.h5), " +
            std::to_string(res.summary.size()) + " summary sentences");

  if (options.figures) {
    const auto gnuplot = find_gnuplot();
    if (!gnuplot)
      res.warnings.push_back(
          "gnuplot was not found: the figures' scripts and data are in "
          "figures/, the images are not (install gnuplot-nox or set "
          "KVAUDIT_GNUPLOT)");
    std::vector<Figure> figure_specs =
        build_figures(ctx, res.accuracy, res.protocol_gap, res.certification);
    for (Figure& f : build_cost_figures(ctx, res.costs)) figure_specs.push_back(std::move(f));
    res.figures = write_figures(root / "figures", figure_specs, gnuplot);
    std::size_t rendered = 0;
    for (const auto& f : res.figures) {
      if (f.png && f.svg)
        ++rendered;
      else if (gnuplot)
        res.warnings.push_back("figure " + f.name + " was not rendered: " + f.message);
    }
    watch.lap("figures: " + std::to_string(rendered) + " of " + std::to_string(res.figures.size()) +
              " rendered");
  }

  // report.md
  ReportDocument doc;
  doc.title = "kvaudit report: " + m.study.name;
  doc.provenance = provenance;
  doc.coverage = &res.coverage;
  doc.warnings = res.warnings;
  doc.summary = res.summary;
  auto tables = [&](std::initializer_list<const char*> ids) {
    std::vector<const Table*> out;
    for (const char* id : ids)
      if (const Table* t = find_table(res.tables, id); t != nullptr) out.push_back(t);
    return out;
  };
  auto figures = [&](const std::string& prefix) {
    std::vector<const RenderedFigure*> out;
    for (const auto& f : res.figures)
      if (f.name.rfind(prefix, 0) == 0) out.push_back(&f);
    return out;
  };
  if (!m.certifications.empty())
    doc.sections.push_back(
        {"Risk certification",
         std::string("Per preregistered block and model; the contract (τ, ε, δ), the "
                     "candidate order and the split were checked against the lock.") +
             (ctx.frame.has_reuse() ? std::string(" Reuse cells are not certified: the "
                                                  "Learn-then-Test binomial p-value needs "
                                                  "independent requests, and the questions of "
                                                  "one context share its compression.")
                                    : std::string()),
         tables({"certification", "certification_candidates", "certification_task_risk"}),
         figures("risk_")});
  if (!res.protocol_gap.per_budget.rows.empty())
    doc.sections.push_back({"Protocol gap (query-aware vs query-agnostic)", "",
                            tables({"protocol_gap_pooled", "protocol_gap"}), figures("gap_")});
  if (!res.baseline_wins.comparisons.rows.empty())
    doc.sections.push_back({"Best-of-3 trivial baseline",
                            "",
                            tables({"baseline_win_counts", "baseline_wins", "baseline_choice"}),
                            {}});
  if (!res.backend_confound.full_kv.rows.empty() || !res.backend_confound.rankings.empty())
    doc.sections.push_back({"Backend confound (sdpa vs eager)",
                            "",
                            tables({"backend_confound", "backend_rankings", "backend_selections"}),
                            {}});
  doc.sections.push_back(
      {"Accuracy", "", tables({"accuracy_by_budget", "accuracy"}), figures("accuracy_")});
  doc.sections.push_back(
      {"Cost", cost_section_intro(res.costs), tables({"cost"}), figures("cost_")});
  doc.sections.push_back(
      {"Exclusions and failures", "", tables({"exclusions", "failed_cells"}), {}});
  doc.sections.push_back(
      {"Coverage details",
       "",
       tables({"coverage", "missing_cells", "duplicate_cells", "unexpected_records"}),
       {}});
  write_report_markdown(root / "report.md", doc);

  res.report_dir = dir.publish();
  watch.lap("published " + res.report_dir.string());
  return res;
}

}  // namespace kvaudit::reduce
