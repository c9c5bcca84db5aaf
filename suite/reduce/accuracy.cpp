// Accuracy with Clopper–Pearson / Hoeffding / cluster-bootstrap intervals, Bonferroni over the
// family (see accuracy.h).
#include "suite/reduce/accuracy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "statistics/clopper_pearson.h"
#include "statistics/cluster_bootstrap.h"

namespace kvaudit::reduce {
namespace {

using RowTuple = std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t, std::int16_t,
                            std::uint16_t, std::uint32_t>;  // ... protocol, method, budget, task

struct RowAcc {
  AccuracyRow row;
  bool binary = true;
  bool reuse = false;
  // Reuse rows: (context, question, utility) of every usable row, for the cluster bootstrap.
  std::vector<std::tuple<std::int64_t, std::uint32_t, double>> clustered;
};

// The cluster bootstrap of a reuse row's mean (arm B = 0, one stratum: the task) at level 1 − a;
// the percentile interval of statistics/cluster_bootstrap.h.
void cluster_bootstrap_interval(const AnalysisContext& ctx, RowAcc& acc, double a) {
  std::sort(acc.clustered.begin(), acc.clustered.end());
  stats::ClusteredPairedComparison cmp;
  cmp.name = "accuracy";
  stats::ClusteredPairedStratum st;
  st.id = acc.row.task;
  for (const auto& [context, question, utility] : acc.clustered) {
    st.arm_a.push_back(utility);
    st.arm_b.push_back(0.0);
    st.cluster.push_back(static_cast<std::uint32_t>(context));  // < 2^24 (cell_lookup.h)
  }
  cmp.strata.push_back(std::move(st));
  stats::BootstrapOptions options;
  options.resamples = ctx.bootstrap.resamples;
  options.seed = ctx.bootstrap.seed;
  options.confidence = 1 - a;
  options.aggregate = stats::Aggregate::pooled;
  options.threads = ctx.bootstrap.threads;
  const auto b = stats::cluster_paired_bootstrap(cmp, options);
  acc.row.mean = b.estimate;
  acc.row.lower = std::max(0.0, b.lower);
  acc.row.upper = std::min(1.0, b.upper);
  acc.row.contexts = b.clusters;
  acc.row.interval = "cluster-bootstrap";
}

}  // namespace

void hoeffding_interval(double mean, std::int64_t n, double a, double& lower, double& upper) {
  const double half = std::sqrt(std::log(2.0 / a) / (2.0 * static_cast<double>(n)));
  lower = std::max(0.0, mean - half);
  upper = std::min(1.0, mean + half);
}

Accuracy compute_accuracy(const AnalysisContext& ctx) {
  const StudyFrame& f = ctx.frame;
  std::map<RowTuple, RowAcc> rows;
  struct SummaryAcc {
    AccuracySummaryRow row;
    double sum = 0;
    double retention_sum = 0;
    std::int64_t retention_n = 0;
  };
  std::map<std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t, std::int16_t,
                      std::uint16_t>,
           SummaryAcc>
      summary;
  for (const FrameCell& c : f.cells) {
    RowAcc& acc = rows[{c.model, c.backend, c.benchmark, c.protocol, c.method, c.budget, c.task}];
    AccuracyRow& r = acc.row;
    SummaryAcc& s = summary[{c.model, c.backend, c.benchmark, c.protocol, c.method, c.budget}];
    switch (c.state) {
      case CellState::ok:
        ++r.n;
        r.sum += c.score;
        if (is_reuse(c)) {
          acc.reuse = true;
          acc.clustered.emplace_back(c.instance, c.question, c.score);
        }
        if (c.score != 0.0 && c.score != 1.0) acc.binary = false;
        ++s.row.n;
        s.sum += c.score;
        if (std::isfinite(c.realised_retention)) {
          s.retention_sum += c.realised_retention;
          ++s.retention_n;
        }
        break;
      case CellState::excluded:
        ++r.excluded;
        break;
      case CellState::failed:
        ++r.failed;
        s.row.partial = true;
        break;
      case CellState::missing:
        ++r.missing;
        s.row.partial = true;
        break;
    }
  }
  Accuracy out;
  out.family =
      resolve_family(ctx.families, ctx.alpha, "accuracy", "accuracy",
                     {"model", "backend", "benchmark", "protocol", "method", "budget", "task"},
                     static_cast<std::int64_t>(rows.size()));
  const stats::Family family = out.family.family();
  const double a = out.family.per_comparison_alpha();
  for (auto& [key, acc] : rows) {
    std::tie(acc.row.model, acc.row.backend, acc.row.benchmark, acc.row.protocol, acc.row.method,
             acc.row.budget, acc.row.task) = key;
    if (acc.reuse && acc.row.n > 0) cluster_bootstrap_interval(ctx, acc, a);
    AccuracyRow r = acc.row;
    if (r.n == 0) {
      r.mean = r.lower = r.upper = std::nan("");
    } else if (acc.reuse) {
      // computed above: the questions of a context are not independent
    } else if (acc.binary) {
      const auto x = static_cast<std::int64_t>(std::llround(r.sum));
      const auto ci = stats::clopper_pearson_interval(x, r.n, out.family.alpha, family);
      r.mean = ci.estimate;
      r.lower = ci.lower;
      r.upper = ci.upper;
      r.interval = "clopper-pearson";
    } else {
      r.mean = r.sum / static_cast<double>(r.n);
      hoeffding_interval(r.mean, r.n, a, r.lower, r.upper);
      r.interval = "hoeffding";
    }
    out.rows.push_back(r);
  }
  for (auto& [key, s] : summary) {
    AccuracySummaryRow r = s.row;
    std::tie(r.model, r.backend, r.benchmark, r.protocol, r.method, r.budget) = key;
    r.mean = r.n > 0 ? s.sum / static_cast<double>(r.n) : std::nan("");
    r.realised_retention =
        s.retention_n > 0 ? s.retention_sum / static_cast<double>(s.retention_n) : std::nan("");
    out.summary.push_back(r);
  }
  return out;
}

std::vector<Table> accuracy_tables(const AnalysisContext& ctx, const Accuracy& acc) {
  std::vector<Table> out;
  {
    Table t;
    t.id = "accuracy";
    t.title = "Accuracy per task with simultaneous intervals";
    t.description =
        "Mean utility per (model, backend, benchmark, protocol, method, budget, task) over the "
        "usable instances (n). Interval at level 1 − α/m over the family: Clopper–Pearson when "
        "every utility is 0 or 1, Hoeffding (mean ± √(ln(2m/α)/(2n))) for fractional "
        "utilities.";
    const bool reuse = ctx.frame.has_reuse();
    if (reuse)
      t.description +=
          " Reuse cells (n counts (context, question) pairs): the percentile interval of the "
          "cluster bootstrap of the mean, which resamples contexts.";
    for (const char* name :
         {"model", "backend", "benchmark", "task", "protocol", "method", "budget"})
      t.add_column(name, ColumnType::text);
    t.add_column("n", ColumnType::integer);
    t.add_column("mean", ColumnType::real, 3);
    t.add_column("lower", ColumnType::real, 3);
    t.add_column("upper", ColumnType::real, 3);
    t.add_column("interval", ColumnType::text, 0, false);
    t.add_column("excluded", ColumnType::integer, 0, false);
    t.add_column("failed", ColumnType::integer, 0, false);
    t.add_column("missing", ColumnType::integer, 0, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& r : acc.rows) {
      t.rows.push_back({ctx.label(Dim::model, r.model), ctx.label(Dim::backend, r.backend),
                        ctx.label(Dim::benchmark, r.benchmark), ctx.frame.tasks[r.task].name,
                        ctx.label(Dim::protocol, r.protocol), ctx.label(Dim::method, r.method),
                        ctx.label(Dim::budget, r.budget), r.n, finite_or_empty(r.mean),
                        finite_or_empty(r.lower), finite_or_empty(r.upper), r.interval, r.excluded,
                        r.failed, r.missing, r.partial()});
    }
    add_family_attributes(t, acc.family);
    t.add_attribute("interval", std::string("two-sided at 1 - alpha/m: Clopper-Pearson (0/1 "
                                            "utilities) or Hoeffding (fractional utilities)") +
                                    (reuse ? "; reuse cells: cluster bootstrap" : ""));
    if (reuse) t.notes.push_back(kReuseIntervalNote);
    t.write_latex = t.rows.size() <= 400;
    t.markdown_row_limit = 40;
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "accuracy_by_budget";
    t.title = "Mean utility per method and budget (all tasks)";
    t.description =
        "Mean utility over every usable instance of every task, per (model, backend, benchmark, "
        "protocol, method, budget); descriptive (no interval). realised_retention: the mean "
        "kept_bytes / full_bytes the records report. The accuracy-vs-compression figures plot "
        "these means.";
    for (const char* name : {"model", "backend", "benchmark", "protocol", "method", "budget"})
      t.add_column(name, ColumnType::text);
    t.add_column("n", ColumnType::integer);
    t.add_column("mean", ColumnType::real, 3);
    t.add_column("realised_retention", ColumnType::real, 3, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& r : acc.summary) {
      t.rows.push_back({ctx.label(Dim::model, r.model), ctx.label(Dim::backend, r.backend),
                        ctx.label(Dim::benchmark, r.benchmark),
                        ctx.label(Dim::protocol, r.protocol), ctx.label(Dim::method, r.method),
                        ctx.label(Dim::budget, r.budget), r.n, finite_or_empty(r.mean),
                        finite_or_empty(r.realised_retention), r.partial});
    }
    t.write_latex = t.rows.size() <= 400;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
