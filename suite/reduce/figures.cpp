// Figure specifications: gnuplot commands and data (see figures.h).
#include "suite/reduce/figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "suite/manifest/number_format.h"

namespace kvaudit::reduce {
namespace {

// A gnuplot single-quoted string (no escape processing; ' is doubled).
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string num(double v) {
  if (!std::isfinite(v)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// The procedure of a certification block as a legend shows it.
std::string short_procedure(const manifest::Certification& block) {
  if (block.procedure == "fixed_sequence") return block.sequential ? "sequential" : "fixed seq.";
  if (block.procedure == "fixed_sequence_multistart")
    return "multistart " + std::to_string(block.starts);
  return block.procedure;
}

}  // namespace

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')
      out += c;
    else if (c >= 'A' && c <= 'Z')
      out += static_cast<char>(c - 'A' + 'a');
    else
      out += '_';
  }
  return out;
}

std::vector<Figure> build_figures(const AnalysisContext& ctx, const Accuracy& accuracy,
                                  const ProtocolGap& gap, const Certification& certification) {
  const manifest::Manifest& m = ctx.frame.manifest();
  std::vector<Figure> out;

  // 1. Certification risk vs retention, per (benchmark, model).
  std::map<std::pair<std::string, std::uint16_t>, std::vector<const CertificationRun*>> by_bm;
  for (const auto& run : certification.runs)
    if (run.computed) by_bm[{run.benchmark, run.model}].push_back(&run);
  for (const auto& [key, runs] : by_bm) {
    const std::string model = ctx.label(Dim::model, key.second);
    Figure f;
    f.name = "risk_" + file_stem(key.first) + "_" + file_stem(model);
    f.title = "Certification risk vs retention: " + key.first + ", " + model;
    std::ostringstream data, plot, selected;
    std::set<double> epsilons, loss_epsilons;
    std::string clauses;
    int index = 0;
    std::string contract;
    bool kinds = false;  // some block with a contract kind other than the original one
    for (const CertificationRun* run : runs) {
      const auto& block = m.certifications[run->block];
      const bool kind = !block.default_contract();
      const bool violation = block.has_risk("violation");
      const bool loss = block.has_risk("mean_loss");
      kinds = kinds || kind;
      if (violation) epsilons.insert(block.epsilon);
      if (loss) loss_epsilons.insert(block.loss_epsilon);
      contract = (violation ? "τ = " + manifest::format_number(block.tau) + ", " : "") +
                 "δ = " + manifest::format_number(block.delta) +
                 ", n = " + std::to_string(run->result.n);
      data << "# " << block.name << ": retention calibration_risk test_risk"
           << (loss ? " calibration_mean_loss test_mean_loss" : "") << "\n";
      const std::int64_t test_n =
          run->result.selected_test ? run->result.selected_test->requests : 0;
      for (std::size_t j = 0; j < run->result.candidates.size(); ++j) {
        const double test_risk =
            test_n > 0 ? static_cast<double>(run->test_violations[j]) / static_cast<double>(test_n)
                       : std::nan("");
        data << num(run->retention[j]) << " "
             << num(violation ? run->result.candidates[j].empirical_risk : std::nan("")) << " "
             << num(violation ? test_risk : std::nan(""));
        if (loss)
          data << " " << num(run->result.candidates[j].mean_loss) << " "
               << num(j < run->test_mean_loss.size() ? run->test_mean_loss[j] : std::nan(""));
        data << "\n";
      }
      data << "\n\n";
      const int lt = method_line_type(
          static_cast<std::int16_t>(m.find_method(block.method) - m.methods.data()));
      // The legend names the contract kind of a block that is not the original contract.
      std::string label = block.method;
      if (kind)
        label += " [" + std::string(block.per_task ? "per task" : "aggregate") + ", " +
                 short_procedure(block) + "]";
      const std::string file = q(f.name + ".dat") + " index " + std::to_string(index);
      if (violation)
        clauses += (clauses.empty() ? "" : ", \\\n     ") + file +
                   " using 1:2 with linespoints lt " + std::to_string(lt) + " title " +
                   q(label + (kind ? " violation (cal.)" : " (calibration)")) + ", '' index " +
                   std::to_string(index) + " using 1:3 with lines lt " + std::to_string(lt) +
                   " dt 2 title " + q(label + (kind ? " violation (test)" : " (test)"));
      if (loss)
        clauses += (clauses.empty() ? "" : ", \\\n     ") + file +
                   " using 1:4 with linespoints lt " + std::to_string(lt) + " pt 4 title " +
                   q(label + " loss (cal.)") + ", '' index " + std::to_string(index) +
                   " using 1:5 with lines lt " + std::to_string(lt) + " dt 3 title " +
                   q(label + " loss (test)");
      ++index;
      if (run->result.selected) {
        const auto& c = run->result.candidates[*run->result.selected];
        selected << num(run->retention[*run->result.selected]) << " "
                 << num(violation ? c.empirical_risk : c.mean_loss) << "\n";
      } else {
        selected << "1 0\n";
      }
    }
    data << "# selected policies: retention calibration_risk\n" << selected.str() << "\n\n";
    for (double eps : epsilons)
      clauses += ", \\\n     " + num(eps) + " with lines lc rgb '#d00000' dt 4 lw 2.5 title " +
                 q("ε = " + manifest::format_number(eps));
    for (double eps : loss_epsilons)
      clauses += ", \\\n     " + num(eps) + " with lines lc rgb '#7000d0' dt 5 lw 2.5 title " +
                 q("ε_L = " + manifest::format_number(eps));
    clauses +=
        ", \\\n     " + q(f.name + ".dat") + " index " + std::to_string(index) +
        " using 1:2 with points pt 6 ps 2.5 lw 2 lc rgb 'black' title 'selected (certified)'";
    plot << "set title " << q(f.title + " (" + contract + ")") << "\n"
         << "set xlabel 'retention (fraction of the KV cache kept)'\n"
         << (kinds ? "set ylabel 'violation rate; mean loss clip(U_full − U_policy, 0, 1)'\n"
                   : "set ylabel 'violation rate  P(U_full − U_policy > τ)'\n")
         << "set key outside right top box\n"
         << "set grid\nset yrange [0:*]\nset xrange [*:1.02]\n"
         << "set offsets 0.02, 0, graph 0.05, 0\n"
         << "plot " << clauses << "\n";
    f.data = data.str();
    f.plot = plot.str();
    f.width = 1100;
    f.caption =
        "Calibration violation rate K_j/n (solid) and test violation rate (dashed) of every "
        "candidate, the risk level ε (red, dash-dotted), and the policy the fixed-sequence "
        "procedure selected "
        "(circled; full-KV fallback at retention 1). Certification needs more than an empirical "
        "rate below ε: the binomial bound must hold at confidence 1 − δ.";
    if (kinds)
      f.caption +=
          " Blocks with another contract kind are labelled [guarantee, procedure]: their mean "
          "loss clip(U_full − U_policy, 0, 1) is drawn with squares (calibration) and dots "
          "(test) against ε_L (purple); a per-task certificate bounds every task's rate, so its "
          "aggregate rate may lie well below ε; the selected point of a block without the "
          "violation risk is at its calibration mean loss.";
    out.push_back(std::move(f));
  }

  // 2a. Pooled protocol gap per (benchmark, backend).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const PairedAnalysisRow*>> pooled;
  for (const auto& r : gap.pooled.rows)
    if (!r.result.empty) pooled[{r.key[1], r.key[0]}].push_back(&r);  // (benchmark, backend)
  for (const auto& [key, rows] : pooled) {
    const std::string bench = ctx.label(Dim::benchmark, key.first);
    const std::string backend = ctx.label(Dim::backend, key.second);
    Figure f;
    f.name = "gap_pooled_" + file_stem(bench) + "_" + file_stem(backend);
    f.title = "Protocol gap per method: " + bench + ", " + backend;
    std::ostringstream data, plot;
    data << "# x delta ci_lower ci_upper method\n";
    int x = 0;
    for (const auto* r : rows)
      data << x++ << " " << num(r->result.estimate) << " " << num(r->result.ci_lower) << " "
           << num(r->result.ci_upper) << " \"" << ctx.label(Dim::method, r->key[2]) << "\"\n";
    plot << "set title " << q(f.title + " (pooled over models and budgets)") << "\n"
         << "set ylabel 'Δ = U(query-aware) − U(query-agnostic)'\n"
         << "set xrange [-0.6:" << num(x - 0.4) << "]\n"
         << "set xtics rotate by -30\nset grid ytics\nset key top left\n"
         << "set offsets 0, 0, graph 0.08, graph 0.08\n"
         << "plot 0 with lines lc rgb 'gray40' dt 2 notitle, \\\n     " << q(f.name + ".dat")
         << " using 1:2:3:4:xtic(5) with yerrorbars pt 7 ps 1.5 lw 2 lc rgb '#1f77b4' title "
         << q("Δ with 95% paired-bootstrap interval") << "\n";
    f.data = data.str();
    f.plot = plot.str();
    f.caption =
        "Protocol gap per method, each instance's differences averaged over models and budgets, "
        "with the 95% stratified paired-bootstrap percentile interval. Δ > 0: the method needs to "
        "see the question.";
    out.push_back(std::move(f));
  }

  // 2b. Protocol gap vs compression per (benchmark, backend, model).
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>,
           std::map<std::int64_t, std::vector<const PairedAnalysisRow*>>>
      per_model;  // (benchmark, backend, model) -> method -> rows
  for (const auto& r : gap.per_budget.rows) {
    if (r.result.empty) continue;
    if (!std::isfinite(ctx.frame.budgets[static_cast<std::size_t>(r.key[4])].nominal_compression))
      continue;
    per_model[{r.key[2], r.key[1], r.key[0]}][r.key[3]].push_back(&r);
  }
  for (const auto& [key, methods] : per_model) {
    const auto& [bench_code, backend_code, model_code] = key;
    const std::string bench = ctx.label(Dim::benchmark, bench_code);
    const std::string backend = ctx.label(Dim::backend, backend_code);
    const std::string model = ctx.label(Dim::model, model_code);
    Figure f;
    f.name = "gap_" + file_stem(bench) + "_" + file_stem(backend) + "_" + file_stem(model);
    f.title = "Protocol gap vs compression: " + bench + ", " + backend + ", " + model;
    std::ostringstream data, plot;
    std::string clauses;
    int index = 0;
    const double spread = 0.006 * static_cast<double>(methods.size());
    for (const auto& [method, rows] : methods) {
      const double offset =
          methods.size() > 1
              ? -spread / 2 + spread * index / static_cast<double>(methods.size() - 1)
              : 0.0;
      data << "# " << ctx.label(Dim::method, method) << ": compression delta ci_lower ci_upper\n";
      for (const auto* r : rows)
        data << num(ctx.frame.budgets[static_cast<std::size_t>(r->key[4])].nominal_compression +
                    offset)
             << " " << num(r->result.estimate) << " " << num(r->result.ci_lower) << " "
             << num(r->result.ci_upper) << "\n";
      data << "\n\n";
      clauses += (clauses.empty() ? "" : ", \\\n     ") + q(f.name + ".dat") + " index " +
                 std::to_string(index) + " using 1:2:3:4 with yerrorlines lt " +
                 std::to_string(method_line_type(static_cast<std::int16_t>(method))) + " title " +
                 q(ctx.label(Dim::method, method));
      ++index;
    }
    plot << "set title " << q(f.title) << "\n"
         << "set xlabel 'compression (fraction of the KV cache removed)'\n"
         << "set ylabel 'Δ = U(query-aware) − U(query-agnostic)'\n"
         << "set key outside right top box\nset grid\n"
         << "set offsets 0.02, 0.02, graph 0.08, graph 0.08\n"
         << "plot 0 with lines lc rgb 'gray40' dt 2 notitle, \\\n     " << clauses << "\n";
    f.data = data.str();
    f.plot = plot.str();
    f.width = 1100;
    f.caption =
        "Protocol gap per method and compression ratio with 95% paired-bootstrap intervals "
        "(methods are offset slightly along x so that their intervals do not overlap).";
    out.push_back(std::move(f));
  }

  // 3. Accuracy vs compression per (benchmark, backend, model), one panel per protocol.
  std::map<std::tuple<std::uint16_t, std::uint8_t, std::uint16_t>,
           std::map<std::uint8_t, std::map<std::int16_t, std::vector<const AccuracySummaryRow*>>>>
      acc;
  for (const auto& r : accuracy.summary) {
    if (r.n == 0) continue;
    if (!std::isfinite(ctx.frame.budgets[r.budget].nominal_compression)) continue;
    acc[{r.benchmark, r.backend, r.model}][r.protocol][r.method].push_back(&r);
  }
  for (const auto& [key, protocols] : acc) {
    const auto& [bench_code, backend_code, model_code] = key;
    const std::string bench = ctx.label(Dim::benchmark, bench_code);
    const std::string backend = ctx.label(Dim::backend, backend_code);
    const std::string model = ctx.label(Dim::model, model_code);
    Figure f;
    f.name = "accuracy_" + file_stem(bench) + "_" + file_stem(backend) + "_" + file_stem(model);
    f.title = "Accuracy vs compression: " + bench + ", " + backend + ", " + model;
    std::ostringstream data, plot;
    int index = 0;
    plot << "set multiplot layout 1," << protocols.size() << " title " << q(f.title) << "\n"
         << "set xlabel 'compression (fraction of the KV cache removed)'\n"
         << "set ylabel 'mean utility'\nset grid\nset yrange [0:1.05]\nset xrange [0:1]\n"
         << "set key below box width 1\nset bmargin 10\n";
    // query-aware (the usual evaluation) on the left, query-agnostic on the right.
    for (auto it = protocols.rbegin(); it != protocols.rend(); ++it) {
      const auto& [protocol, methods] = *it;
      std::string clauses;
      for (const auto& [method, rows] : methods) {
        if (method < 0) {
          const double full = rows.front()->mean;
          clauses += (clauses.empty() ? "" : ", \\\n     ") + num(full) +
                     " with lines lc rgb 'black' dt 2 lw 2 title 'full KV'";
          continue;
        }
        data << "# " << ctx.label(Dim::protocol, protocol) << " " << ctx.label(Dim::method, method)
             << ": compression mean\n";
        std::vector<std::pair<double, double>> points;
        for (const auto* r : rows)
          points.emplace_back(ctx.frame.budgets[r->budget].nominal_compression, r->mean);
        std::sort(points.begin(), points.end());
        for (const auto& [x, y] : points) data << num(x) << " " << num(y) << "\n";
        data << "\n\n";
        clauses += (clauses.empty() ? "" : ", \\\n     ") + q(f.name + ".dat") + " index " +
                   std::to_string(index) + " using 1:2 with linespoints lt " +
                   std::to_string(method_line_type(method)) + " title " +
                   q(ctx.label(Dim::method, method));
        ++index;
      }
      plot << "set title " << q(ctx.label(Dim::protocol, protocol)) << "\n"
           << "plot " << clauses << "\n";
    }
    plot << "unset multiplot\n";
    f.data = data.str();
    f.plot = plot.str();
    f.width = protocols.size() > 1 ? 1400 : 900;
    f.height = 760;
    f.caption =
        "Mean utility over all tasks' usable instances per method and compression ratio, one "
        "panel per protocol; full KV dashed.";
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace kvaudit::reduce
