// Risk certification per (block, model) (see certification_analysis.h).
#include "suite/reduce/certification_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/attention_backend.h"
#include "base/errors.h"
#include "base/protocol.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::reduce {
namespace {

// The budget kind of a block's candidates: what the study's cells of its method carry (the
// expansion gives a threshold method threshold cells only, and the records the same budget_kind),
// else the grid's ratio kind.
manifest::BudgetKind candidate_kind(const StudyFrame& f, std::int16_t method,
                                    const manifest::Grid& grid) {
  for (const FrameCell& c : f.cells) {
    if (c.method == method && f.budgets[c.budget].kind == manifest::BudgetKind::threshold)
      return manifest::BudgetKind::threshold;
  }
  return *grid.ratio_kind == manifest::RatioKind::compression ? manifest::BudgetKind::compression
                                                              : manifest::BudgetKind::retention;
}

std::uint16_t budget_index(const StudyFrame& f, manifest::BudgetKind kind, double value) {
  for (std::size_t i = 0; i < f.budgets.size(); ++i)
    if (f.budgets[i].kind == kind && f.budgets[i].value == value)
      return static_cast<std::uint16_t>(i);
  throw InternalError("certification candidate " + manifest::format_number(value) +
                      " is not a budget of the expansion");
}

struct Request {
  std::uint32_t unit;
  std::uint32_t task;
  std::int64_t instance;
};

std::string risks_text(const manifest::Certification& block) {
  std::string s;
  for (const auto& r : block.risks) s += (s.empty() ? "" : "+") + r;
  return s;
}

std::string guarantee_text(const manifest::Certification& block) {
  return block.per_task ? "per task" : "aggregate";
}

std::string sequential_decision_text(const SequentialCandidateReport& c) {
  std::string s = stats::sequential_decision_name(c.decision);
  if (c.stopped_early) s += " (stopped early)";
  return s;
}

// Sequential calibration of a `sequential = true` block (sequential_calibration.h): every planned
// calibration request in the canonical (task, instance) order; an excluded full-KV cell leaves n,
// a missing or failed cell is loss 1. The loss is the violation indicator at ε, or, for a block
// without the violation risk, clip(U_full − U, 0, 1) at the mean-loss level.
SequentialCalibrationResult replay_sequential(
    const manifest::Manifest& m, const manifest::Certification& block,
    const stats::ContractKind& kind, const std::vector<Request>& calibration,
    const std::vector<std::string>& ids, const AnalysisContext& ctx, std::int16_t method,
    const std::vector<std::uint16_t>& budgets, std::uint16_t none, std::uint8_t protocol) {
  const StudyFrame& f = ctx.frame;
  SequentialCalibrationInput in;
  in.block = block.name;
  in.seed = m.study.seed;
  in.epsilon = kind.violation ? block.epsilon : block.loss_epsilon;
  in.delta = block.delta;
  in.candidates.resize(budgets.size());
  for (std::size_t j = 0; j < budgets.size(); ++j) in.candidates[j].id = ids[j];
  for (const Request& rq : calibration) {
    const FrameCell& full = f.cells[*ctx.lookup.cell(rq.unit, -1, none, protocol)];
    in.excluded.push_back(full.state == CellState::excluded ? 1 : 0);
    for (std::size_t j = 0; j < budgets.size(); ++j) {
      const auto ci = ctx.lookup.cell(rq.unit, method, budgets[j], protocol);
      const FrameCell* cand = ci ? &f.cells[*ci] : nullptr;
      const bool ok =
          cand != nullptr && full.state == CellState::ok && cand->state == CellState::ok;
      double loss = 1;
      if (ok) {
        const double d = full.score - cand->score;
        loss = kind.violation ? (d > block.tau ? 1.0 : 0.0) : std::clamp(d, 0.0, 1.0);
      }
      in.candidates[j].losses.push_back(loss);
      in.candidates[j].missing.push_back(ok || full.state == CellState::excluded ? 0 : 1);
    }
  }
  return replay_sequential_calibration(in);
}

// The calibration cells a sequential run did not need (CertificationRun::sequential_skipped):
// walking the preregistered order over the requests not excluded, candidate j's missing cells
// after its first requests_used requests, and the missing full-KV cells after the largest
// requests_used.
std::vector<std::size_t> sequentially_skipped(const SequentialCalibrationResult& seq,
                                              const std::vector<Request>& calibration,
                                              const AnalysisContext& ctx, std::int16_t method,
                                              const std::vector<std::uint16_t>& budgets,
                                              std::uint16_t none, std::uint8_t protocol) {
  const StudyFrame& f = ctx.frame;
  std::vector<std::size_t> out;
  std::int64_t longest = 0;
  for (const auto& c : seq.candidates) longest = std::max(longest, c.requests_used);
  std::int64_t seen = 0;  // requests not excluded so far, along the order
  for (const std::size_t r : seq.order) {
    if (r >= calibration.size()) continue;
    const auto full = ctx.lookup.cell(calibration[r].unit, -1, none, protocol);
    if (!full || f.cells[*full].state == CellState::excluded) continue;
    ++seen;
    for (std::size_t j = 0; j < budgets.size() && j < seq.candidates.size(); ++j) {
      if (seen <= seq.candidates[j].requests_used) continue;
      const auto ci = ctx.lookup.cell(calibration[r].unit, method, budgets[j], protocol);
      if (ci && f.cells[*ci].state == CellState::missing) out.push_back(*ci);
    }
    if (seen > longest && f.cells[*full].state == CellState::missing) out.push_back(*full);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

stats::ContractKind contract_kind(const manifest::Certification& block) {
  stats::ContractKind kind;
  kind.violation = block.has_risk("violation");
  kind.mean_loss = block.has_risk("mean_loss");
  kind.bound = block.bound == "wsr" ? stats::LossBound::wsr : stats::LossBound::hoeffding_bentkus;
  kind.loss_epsilon = block.loss_epsilon;
  kind.procedure = stats::parse_testing_procedure(
      block.procedure, "certification block " + block.name + " procedure");
  kind.starts = block.starts > 0 ? static_cast<std::size_t>(block.starts) : 1;
  kind.per_task = block.per_task;
  return kind;
}

Certification compute_certification(const AnalysisContext& ctx) {
  const StudyFrame& f = ctx.frame;
  const manifest::Manifest& m = f.manifest();
  Certification out;
  std::int64_t expected_task_rows = 0;
  for (const auto& block : m.certifications)
    expected_task_rows += static_cast<std::int64_t>(
        m.find_grid(block.grid)->models.size() * m.find_benchmark(block.benchmark)->tasks.size());
  out.task_family =
      resolve_family(ctx.families, ctx.alpha, "certification_task_risk", "certification_task_risk",
                     {"model", "method", "task"}, expected_task_rows);
  out.per_block_family = !out.task_family.declared;
  if (out.per_block_family)
    out.task_family.note =
        "not declared in the manifest: each (block, model) is its own family of its tasks "
        "(m = the block's number of tasks)";

  for (std::size_t bi = 0; bi < m.certifications.size(); ++bi) {
    const auto& block = m.certifications[bi];
    const manifest::Grid* grid = m.find_grid(block.grid);
    const manifest::MethodConfig* method_cfg = m.find_method(block.method);
    const auto method = static_cast<std::int16_t>(method_cfg - m.methods.data());
    const auto protocol_value = parse_protocol(block.protocol);
    const auto backend_value = parse_attention_backend(block.backend);
    if (!protocol_value || !backend_value) {
      throw InternalError("certification block " + block.name +
                          " names an unknown protocol or "
                          "attention backend");
    }
    const auto protocol = static_cast<std::uint8_t>(*protocol_value);
    const auto backend = *backend_value;
    const auto bench =
        static_cast<std::uint16_t>(m.find_benchmark(block.benchmark) - m.benchmarks.data());
    const manifest::BudgetKind kind = candidate_kind(f, method, *grid);
    std::vector<std::uint16_t> budgets;
    for (double v : block.candidates) budgets.push_back(budget_index(f, kind, v));
    const std::uint16_t none = budget_index(f, manifest::BudgetKind::none, 0.0);

    for (const auto& model_name : grid->models) {
      const auto model = static_cast<std::uint16_t>(
          std::find_if(m.models.begin(), m.models.end(),
                       [&](const manifest::Model& x) { return x.name == model_name; }) -
          m.models.begin());
      CertificationRun run;
      run.block = bi;
      run.model = model;
      run.benchmark = block.benchmark;
      run.method = block.method;
      run.protocol = block.protocol;
      run.backend = block.backend;
      run.candidates = block.candidates;
      for (double v : block.candidates)
        run.candidate_ids.push_back(block.method + "@" + manifest::format_number(v));

      // The split's requests, ordered by (task, instance).
      std::vector<Request> calibration, test;
      const auto& units = ctx.frame.study->expansion.units;
      for (std::uint32_t ui = 0; ui < units.size(); ++ui) {
        const auto& u = units[ui];
        if (u.model != model || u.benchmark != bench || u.attention_backend != backend) continue;
        if (u.split == manifest::Split::none) continue;
        const auto full = ctx.lookup.cell(ui, -1, none, protocol);
        if (!full) continue;
        const FrameCell& fc = f.cells[*full];
        (u.split == manifest::Split::calibration ? calibration : test)
            .push_back(Request{ui, fc.task, u.instance});
      }
      auto by_task = [](const Request& a, const Request& b) {
        return a.task != b.task ? a.task < b.task : a.instance < b.instance;
      };
      std::sort(calibration.begin(), calibration.end(), by_task);
      std::sort(test.begin(), test.end(), by_task);
      run.calibration_planned = static_cast<std::int64_t>(calibration.size());
      run.test_planned = static_cast<std::int64_t>(test.size());

      stats::CertificationInput input;
      input.name = block.name + "/" + model_name;
      input.contract = stats::Contract{block.tau, block.epsilon, block.delta};
      input.task_alpha = out.task_family.alpha;
      input.task_family_name =
          out.per_block_family ? "certification_task_risk:" + block.name : out.task_family.name;
      input.kind = contract_kind(block);
      const bool kinds = !input.kind.is_default();
      if (!block.default_contract()) out.contract_kinds = true;
      input.candidates.resize(block.candidates.size());
      for (std::size_t j = 0; j < block.candidates.size(); ++j)
        input.candidates[j].id = run.candidate_ids[j];
      std::vector<double> realised_sum(block.candidates.size(), 0);
      std::vector<std::int64_t> realised_n(block.candidates.size(), 0);

      // Fills the violation vectors of one split; returns false for a request that leaves n.
      auto add_request = [&](const Request& rq, bool is_calibration) {
        const FrameCell& full = f.cells[*ctx.lookup.cell(rq.unit, -1, none, protocol)];
        if (full.state == CellState::excluded) {
          ++(is_calibration ? run.calibration_excluded : run.test_excluded);
          return;
        }
        for (std::size_t j = 0; j < budgets.size(); ++j) {
          const auto ci = ctx.lookup.cell(rq.unit, method, budgets[j], protocol);
          const FrameCell* cand = ci ? &f.cells[*ci] : nullptr;
          std::uint8_t v = 1;
          double loss = 1;  // the worst case when a cell is missing or failed
          if (cand != nullptr && full.state == CellState::ok && cand->state == CellState::ok) {
            v = (full.score - cand->score > block.tau) ? 1 : 0;
            loss = std::clamp(full.score - cand->score, 0.0, 1.0);
            if (is_calibration && std::isfinite(cand->realised_retention)) {
              realised_sum[j] += cand->realised_retention;
              ++realised_n[j];
            }
          } else {
            run.partial = true;
            ++(is_calibration ? run.calibration_imputed : run.test_imputed);
          }
          (is_calibration ? input.candidates[j].calibration_violations
                          : input.candidates[j].test_violations)
              .push_back(v);
          if (input.kind.mean_loss)
            (is_calibration ? input.candidates[j].calibration_losses
                            : input.candidates[j].test_losses)
                .push_back(loss);
        }
        if (!is_calibration) input.test_tasks.push_back(f.tasks[rq.task].name);
        if (is_calibration && kinds) input.calibration_tasks.push_back(f.tasks[rq.task].name);
      };
      for (const auto& rq : calibration) add_request(rq, true);
      for (const auto& rq : test) add_request(rq, false);

      run.retention_source = kind == manifest::BudgetKind::threshold
                                 ? "realised (mean kept_bytes/full_bytes)"
                                 : "declared";
      for (std::size_t j = 0; j < block.candidates.size(); ++j) {
        const double v = block.candidates[j];
        if (kind == manifest::BudgetKind::retention)
          run.retention.push_back(v);
        else if (kind == manifest::BudgetKind::compression)
          run.retention.push_back(1 - v);
        else
          run.retention.push_back(realised_n[j] > 0
                                      ? realised_sum[j] / static_cast<double>(realised_n[j])
                                      : std::nan(""));
        std::int64_t tv = 0;
        for (auto x : input.candidates[j].test_violations) tv += x;
        run.test_violations.push_back(tv);
        if (input.kind.mean_loss) {
          const auto& tl = input.candidates[j].test_losses;
          double sum = 0;
          for (double x : tl) sum += x;
          run.test_mean_loss.push_back(tl.empty() ? std::nan("")
                                                  : sum / static_cast<double>(tl.size()));
        }
      }

      // The LTT binomial p-value needs independent requests; the questions of a reuse context
      // share its compression, and no context-level risk is defined yet (docs/design/reuse.md
      // §Reduce), so a reuse block is reported, not certified.
      if (*protocol_value == Protocol::reuse) {
        run.computed = false;
        run.not_computed_reason = kReuseNotCertified;
        out.runs.push_back(std::move(run));
        continue;
      }
      if (input.candidates.empty() || input.candidates[0].calibration_violations.empty()) {
        run.computed = false;
        run.not_computed_reason = "no usable calibration request";
        out.runs.push_back(std::move(run));
        continue;
      }
      run.result = stats::certify(input);
      run.computed = true;
      if (block.sequential) {
        run.sequential = replay_sequential(m, block, input.kind, calibration, run.candidate_ids,
                                           ctx, method, budgets, none, protocol);
        run.sequential_skipped = sequentially_skipped(*run.sequential, calibration, ctx, method,
                                                      budgets, none, protocol);
      }
      if (run.result.selected_test) {
        if (out.per_block_family) {
          run.task_risk = run.result.selected_test->per_task;
        } else {
          const stats::Family fam = out.task_family.family();
          for (const auto& tr : run.result.selected_test->per_task) {
            stats::TaskRisk r = tr;
            if (r.requests > 0) {
              r.interval = stats::clopper_pearson_interval(r.violations, r.requests,
                                                           out.task_family.alpha, fam);
              r.lower_bound_exceeds_epsilon = r.interval.lower > block.epsilon;
            }
            run.task_risk.push_back(r);
          }
        }
      }
      out.runs.push_back(std::move(run));
    }
  }
  return out;
}

std::vector<Table> certification_tables(const AnalysisContext& ctx, const Certification& cert) {
  const manifest::Manifest& m = ctx.frame.manifest();
  std::vector<Table> out;
  const bool kinds = cert.contract_kinds;  // the contract-kind columns (none in older studies)
  {
    Table t;
    t.id = "certification";
    t.title = "Risk certification (fixed-sequence Learn-then-Test)";
    t.description =
        "Per preregistered block and model: n calibration requests; K* = the largest violation "
        "count that certifies (p = P{Bin(n, ε) ≤ K} ≤ δ); the selected policy (the last "
        "candidate certified before the first failure, or full KV) and the plug-in rule's choice "
        "(the most aggressive candidate with calibration risk ≤ ε, no guarantee) beside it; both "
        "evaluated on the test split. The guarantee: with probability ≥ 1 − δ over the "
        "calibration draw, the selected policy's population violation rate is ≤ ε. Missing or "
        "failed cells count as violations (partial rows).";
    for (const char* name : {"block", "model", "method", "benchmark"})
      t.add_column(name, ColumnType::text);
    t.add_column("tau", ColumnType::real, 2, true, "τ");
    t.add_column("epsilon", ColumnType::real, 3, true, "ε");
    t.add_column("delta", ColumnType::real, 3, true, "δ");
    if (kinds) {
      t.add_column("risks", ColumnType::text);
      t.add_column("bound", ColumnType::text, 0, false);
      t.add_column("loss_epsilon", ColumnType::real, 3, true, "ε_L");
      t.add_column("procedure", ColumnType::text);
      t.add_column("starts", ColumnType::integer, 0, false);
      t.add_column("guarantee", ColumnType::text);
    }
    t.add_column("n", ColumnType::integer);
    t.add_column("violation_cap", ColumnType::integer, 0, false);
    t.add_column("k_star", ColumnType::integer, 0, true, "K*");
    t.add_column("certified", ColumnType::integer, 0, false);
    t.add_column("selected", ColumnType::text);
    t.add_column("selected_k", ColumnType::integer, 0, true, "K sel.");
    t.add_column("plug_in", ColumnType::text, 0, true, "plug-in");
    t.add_column("test_n", ColumnType::integer, 0, false);
    t.add_column("test_violations", ColumnType::integer, 0, false);
    t.add_column("test_risk", ColumnType::real, 4, true, "test risk");
    t.add_column("plug_in_test_risk", ColumnType::real, 4, true, "plug-in test");
    t.add_column("tasks_flagged", ColumnType::integer, 0, true, "tasks > ε");
    if (kinds) {
      t.add_column("selected_mean_loss", ColumnType::real, 4, true, "cal. loss sel.");
      t.add_column("test_mean_loss", ColumnType::real, 4, true, "test loss");
      t.add_column("plug_in_test_mean_loss", ColumnType::real, 4, false);
      t.add_column("sequential_selected", ColumnType::text, 0, true, "sequential");
      t.add_column("sequential_requests", ColumnType::integer, 0, false);
      t.add_column("compute_saved", ColumnType::real, 3, true, "saved");
    }
    t.add_column("calibration_excluded", ColumnType::integer, 0, false);
    t.add_column("calibration_imputed", ColumnType::integer, 0, false);
    t.add_column("note", ColumnType::text, 0, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& run : cert.runs) {
      const auto& block = m.certifications[run.block];
      // Columns of the violation risk are empty for a block that does not certify it.
      const bool violation = block.has_risk("violation");
      const auto v = [&](Value x) { return violation ? x : Value{}; };
      std::vector<Value> row{block.name,   ctx.label(Dim::model, run.model),
                             run.method,   run.benchmark,
                             v(block.tau), block.epsilon,
                             block.delta};
      if (kinds)
        row.insert(row.end(), {risks_text(block), block.bound,
                               block.has_risk("mean_loss") ? Value{block.loss_epsilon} : Value{},
                               block.procedure, block.starts > 0 ? Value{block.starts} : Value{},
                               guarantee_text(block)});
      const auto kind_results = [&](std::vector<Value>& r_) {
        if (!kinds) return;
        const auto& r = run.result;
        const bool loss = block.has_risk("mean_loss") && run.computed;
        const auto& st = r.selected_test;
        const auto& pt = r.plug_in_test;
        r_.push_back(loss ? Value{r.selected ? r.candidates[*r.selected].mean_loss : 0.0}
                          : Value{});
        r_.push_back(loss && st ? finite_or_empty(st->mean_loss) : Value{});
        r_.push_back(loss && pt ? finite_or_empty(pt->mean_loss) : Value{});
        if (run.sequential) {
          std::int64_t used = 0;
          for (const auto& c : run.sequential->candidates) used += c.requests_used;
          r_.insert(r_.end(),
                    {run.sequential->selected_policy, used, run.sequential->fraction_saved()});
        } else {
          r_.insert(r_.end(), {Value{}, Value{}, Value{}});
        }
      };
      if (!run.computed) {
        row.insert(row.end(),
                   {std::int64_t{0}, Value{}, Value{}, Value{}, std::string("—"), Value{},
                    std::string("—"), Value{}, Value{}, Value{}, Value{}, Value{}});
        kind_results(row);
        row.insert(row.end(), {run.calibration_excluded, run.calibration_imputed,
                               run.not_computed_reason, run.partial});
        t.rows.push_back(std::move(row));
        continue;
      }
      const auto& r = run.result;
      std::int64_t certified = 0;
      for (const auto& c : r.candidates) certified += c.certified ? 1 : 0;
      const std::int64_t selected_k = r.selected ? r.candidates[*r.selected].violations : 0;
      const auto& st = r.selected_test;
      const auto& pt = r.plug_in_test;
      // K* and the cap are the aggregate violation test's; not applicable per task.
      const auto agg = [&](Value x) { return violation && !block.per_task ? x : Value{}; };
      row.insert(
          row.end(),
          {r.n, agg(r.violation_cap), agg(r.k_star), certified, r.selected_policy, v(selected_k),
           r.plug_in_policy, st ? Value{st->requests} : Value{},
           v(st ? Value{st->violations} : Value{}), v(st ? Value{st->empirical_risk} : Value{}),
           v(pt ? Value{pt->empirical_risk} : Value{}),
           v(st ? Value{static_cast<std::int64_t>(std::count_if(
                      run.task_risk.begin(), run.task_risk.end(),
                      [](const stats::TaskRisk& x) { return x.lower_bound_exceeds_epsilon; }))}
                : Value{})});
      kind_results(row);
      row.insert(row.end(),
                 {run.calibration_excluded, run.calibration_imputed, std::string(), run.partial});
      t.rows.push_back(std::move(row));
    }
    t.add_attribute("p_value", "P{Bin(n, eps) <= K} if K <= floor(n eps) - 1, else 1");
    t.add_attribute("procedure",
                    "fixed-sequence: certify while p <= delta, stop at the first "
                    "failure; full KV when the first candidate fails");
    t.add_attribute("plug_in", "most aggressive candidate with K/n <= eps (no guarantee)");
    if (kinds) {
      t.description +=
          " Contract kinds (columns risks … guarantee): the mean loss clip(U_full − U_policy, 0, "
          "1) at level ε_L (Hoeffding–Bentkus or WSR p-value), several risks jointly (p = the "
          "max over the risks), the procedure over the candidates (fixed sequence, multi-start, "
          "Bonferroni, Holm; the selected policy is the most aggressive certified candidate) and "
          "the guarantee: `aggregate` (the rate over all requests) or `per task` (every task's "
          "rate ≤ its level; p = the max over the tasks). Sequential blocks: the replayed "
          "anytime-valid decision, the calibration requests it used and the fraction of "
          "candidate cells saved. Violation columns are empty for a block without the "
          "violation risk; K* and the cap for per-task blocks.";
      t.add_attribute("p_value_mean_loss",
                      "hoeffding_bentkus: min(exp(-n h1(min(r,a), a)), e P{Bin(n, a) <= "
                      "ceil(n r)}); wsr: 1/max_t K_t(a), predictable-plug-in betting (bets tuned "
                      "at delta)");
      t.add_attribute("p_value_joint", "max over the block's risks");
      t.add_attribute("per_task",
                      "p = max over the tasks of the per-task p-values "
                      "(intersection-union test; no factor over the tasks)");
      t.add_attribute("selected", "the most aggressive certified candidate; full KV when none");
    }
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "certification_candidates";
    t.title = "Certification candidates in preregistered order";
    t.description =
        "Every candidate of every (block, model): calibration violations K_j, empirical risk "
        "K_j/n, the p-value p_j, whether the fixed sequence reached it (tested) and certified it, "
        "and its test-split violations (descriptive).";
    for (const char* name : {"block", "model"}) t.add_column(name, ColumnType::text);
    t.add_column("order", ColumnType::integer);
    t.add_column("candidate", ColumnType::text);
    t.add_column("retention", ColumnType::real, 3);
    t.add_column("k", ColumnType::integer, 0, true, "K_j");
    t.add_column("calibration_risk", ColumnType::real, 4, true, "cal. risk");
    t.add_column("p_value", ColumnType::pvalue, 4, true, "p_j");
    if (kinds) {
      t.add_column("p_violation", ColumnType::pvalue, 4, false);
      t.add_column("p_mean_loss", ColumnType::pvalue, 4, false);
      t.add_column("mean_loss", ColumnType::real, 4, true, "cal. loss");
      t.add_column("worst_task", ColumnType::text, 0, false);
      t.add_column("level", ColumnType::real, 4, false);
    }
    t.add_column("tested", ColumnType::flag);
    t.add_column("certified", ColumnType::flag);
    t.add_column("test_violations", ColumnType::integer, 0, false);
    t.add_column("test_risk", ColumnType::real, 4, true, "test risk");
    if (kinds) {
      t.add_column("test_mean_loss", ColumnType::real, 4, true, "test loss");
      t.add_column("sequential_decision", ColumnType::text, 0, false);
      t.add_column("sequential_requests", ColumnType::integer, 0, false);
    }
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& run : cert.runs) {
      if (!run.computed) continue;
      const auto& block = m.certifications[run.block];
      const std::int64_t test_n = run.result.selected_test ? run.result.selected_test->requests : 0;
      const bool violation = block.has_risk("violation");
      const auto v = [&](Value x) { return violation ? x : Value{}; };
      for (std::size_t j = 0; j < run.result.candidates.size(); ++j) {
        const auto& c = run.result.candidates[j];
        if (!kinds) {
          t.rows.push_back({block.name, ctx.label(Dim::model, run.model),
                            static_cast<std::int64_t>(j + 1), c.id,
                            finite_or_empty(run.retention[j]), c.violations, c.empirical_risk,
                            c.p_value, c.tested, c.certified, run.test_violations[j],
                            test_n > 0 ? Value{static_cast<double>(run.test_violations[j]) /
                                               static_cast<double>(test_n)}
                                       : Value{},
                            run.partial});
          continue;
        }
        Value seq_decision, seq_requests;
        if (run.sequential && j < run.sequential->candidates.size()) {
          const auto& sc = run.sequential->candidates[j];
          seq_decision = sequential_decision_text(sc);
          seq_requests = sc.requests_used;
        }
        t.rows.push_back(
            {block.name,
             ctx.label(Dim::model, run.model),
             static_cast<std::int64_t>(j + 1),
             c.id,
             finite_or_empty(run.retention[j]),
             v(c.violations),
             v(c.empirical_risk),
             c.p_value,
             finite_or_empty(c.p_violation),
             finite_or_empty(c.p_mean_loss),
             finite_or_empty(c.mean_loss),
             c.worst_task,
             finite_or_empty(c.level),
             c.tested,
             c.certified,
             v(run.test_violations[j]),
             v(test_n > 0 ? Value{static_cast<double>(run.test_violations[j]) /
                                  static_cast<double>(test_n)}
                          : Value{}),
             j < run.test_mean_loss.size() ? finite_or_empty(run.test_mean_loss[j]) : Value{},
             seq_decision,
             seq_requests,
             run.partial});
      }
    }
    t.markdown_row_limit = 80;
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "certification_task_risk";
    t.title = "Per-task test risk of the selected policy";
    t.description =
        "Test-split violations of the selected policy per task with a two-sided Clopper–Pearson "
        "interval at 1 − α/m over the family; flagged when the lower bound exceeds ε: the "
        "aggregate certificate is not a per-task guarantee.";
    for (const char* name : {"block", "model", "policy", "task"})
      t.add_column(name, ColumnType::text);
    t.add_column("violations", ColumnType::integer);
    t.add_column("n", ColumnType::integer);
    t.add_column("risk", ColumnType::real, 3);
    t.add_column("lower", ColumnType::real, 3);
    t.add_column("upper", ColumnType::real, 3);
    t.add_column("family", ColumnType::text, 0, false);
    t.add_column("m", ColumnType::integer, 0, false);
    t.add_column("exceeds_epsilon", ColumnType::flag, 0, true, "> ε");
    if (kinds) {
      t.add_column("test_mean_loss", ColumnType::real, 3, true, "test loss");
      t.add_column("guarantee", ColumnType::text);
    }
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& run : cert.runs) {
      if (!run.computed || !run.result.selected_test) continue;
      const auto& block = m.certifications[run.block];
      for (const auto& tr : run.task_risk) {
        std::vector<Value> row{block.name,
                               ctx.label(Dim::model, run.model),
                               run.result.selected_policy,
                               tr.task,
                               tr.violations,
                               tr.requests,
                               tr.requests > 0 ? Value{tr.interval.estimate} : Value{},
                               tr.requests > 0 ? Value{tr.interval.lower} : Value{},
                               tr.requests > 0 ? Value{tr.interval.upper} : Value{},
                               tr.interval.family,
                               static_cast<std::int64_t>(tr.interval.m),
                               tr.lower_bound_exceeds_epsilon};
        if (kinds) {
          if (!block.has_risk("violation"))  // descriptive counts at τ = 0 would mislead
            for (std::size_t i : {4u, 6u, 7u, 8u}) row[i] = Value{};
          row.insert(row.end(), {finite_or_empty(tr.mean_loss), guarantee_text(block)});
        }
        row.push_back(run.partial);
        t.rows.push_back(std::move(row));
      }
    }
    if (cert.per_block_family) {
      t.add_attribute("family",
                      "certification_task_risk:<block> (per table: one per block and "
                      "model, over its tasks)");
      t.add_attribute("family_declared", "false");
      t.add_attribute("m", "the block's number of tasks (column m)");
      t.add_attribute("alpha", format_exact(cert.task_family.alpha));
      t.add_attribute("family_note", cert.task_family.note);
    } else {
      add_family_attributes(t, cert.task_family);
    }
    if (kinds)
      t.add_attribute("guarantee",
                      "per task: the certificate itself bounds every task's risk (p = max over "
                      "the tasks); aggregate: only the rate over all requests, so a task may "
                      "exceed epsilon (exceeds_epsilon)");
    t.markdown_row_limit = 80;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
