// Method vs best-of-3 trivial baseline (see baseline_wins.h).
#include "suite/reduce/baseline_wins.h"

#include <cmath>
#include <map>
#include <tuple>

namespace kvaudit::reduce {
namespace {

using BaselineGroupKey =
    std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t, std::uint16_t,
               std::uint32_t>;  // model backend bench proto budget task

BaselineGroupKey group_of(const FrameCell& c) {
  return {c.model, c.backend, c.benchmark, c.protocol, c.budget, c.task};
}

struct ScoreMean {
  double sum = 0;
  std::int64_t n = 0;
  bool unusable = false;
};

}  // namespace

BaselineWins compute_baseline_wins(const AnalysisContext& ctx) {
  const StudyFrame& f = ctx.frame;
  // Baseline means per group.
  std::map<BaselineGroupKey, std::map<std::int16_t, ScoreMean>> baseline_means;
  for (const FrameCell& c : f.cells) {
    if (!f.is_trivial_baseline(c)) continue;
    ScoreMean& acc = baseline_means[group_of(c)][c.method];
    if (c.state == CellState::ok) {
      acc.sum += c.score;
      ++acc.n;
    } else if (c.state == CellState::failed || c.state == CellState::missing) {
      acc.unusable = true;
    }
  }
  BaselineWins out;
  std::map<BaselineGroupKey, std::size_t> choice_of;
  for (const auto& [key, per_method] : baseline_means) {
    BaselineChoice ch;
    std::tie(ch.model, ch.backend, ch.benchmark, ch.protocol, ch.budget, ch.task) = key;
    double best = -1;
    for (const auto& [method, acc] : per_method) {  // method indices follow configuration names
      const double mean = acc.n > 0 ? acc.sum / static_cast<double>(acc.n) : std::nan("");
      ch.means.emplace_back(method, mean);
      if (acc.unusable) ch.partial = true;
      if (acc.n > 0 && mean > best) {
        best = mean;
        ch.chosen = method;
      }
    }
    choice_of[key] = out.choices.size();
    out.choices.push_back(std::move(ch));
  }

  PairAccumulator pairs;
  for (const FrameCell& c : f.cells) {
    if (c.method < 0 || f.is_trivial_baseline(c)) continue;
    const auto it = choice_of.find(group_of(c));
    if (it == choice_of.end()) continue;  // no baseline in this group
    const BaselineChoice& ch = out.choices[it->second];
    const RowKey key{c.model, c.backend, c.benchmark, c.protocol, c.method, c.budget};
    if (ch.partial) pairs.mark_partial(key);
    if (ch.chosen < 0) {
      pairs.add_values(key, c.task, c.instance, c.question, is_reuse(c), CellState::missing, 0, 0);
      continue;
    }
    const auto partner = ctx.lookup.cell(c.unit, ch.chosen, c.budget, c.protocol, c.question);
    if (!partner) continue;
    pairs.add(key, c, f.cells[*partner]);
  }
  out.comparisons = run_paired_analysis(
      ctx, pairs, "baseline_wins", "baseline_wins",
      {Dim::model, Dim::backend, Dim::benchmark, Dim::protocol, Dim::method, Dim::budget}, true);

  std::map<std::tuple<std::uint16_t, std::uint8_t, std::int16_t>, WinCount> counts;
  for (const auto& r : out.comparisons.rows) {
    const auto benchmark = static_cast<std::uint16_t>(r.key[2]);
    const auto protocol = static_cast<std::uint8_t>(r.key[3]);
    const auto method = static_cast<std::int16_t>(r.key[4]);
    WinCount& w = counts[{benchmark, protocol, method}];
    w.benchmark = benchmark;
    w.protocol = protocol;
    w.method = method;
    ++w.rows;
    if (r.pairs.partial()) ++w.partial_rows;
    if (r.result.empty) continue;
    if (r.result.estimate > 0) ++w.wins;
    if (r.result.significant) ++w.significant_wins;
    if (r.result.p_test_less <= out.comparisons.family.per_comparison_alpha())
      ++w.significant_losses;
    w.mean_delta += r.result.estimate;
  }
  for (auto& [key, w] : counts) {
    std::int64_t used = 0;
    for (const auto& r : out.comparisons.rows)
      if (r.key[2] == w.benchmark && r.key[3] == w.protocol && r.key[4] == w.method &&
          !r.result.empty)
        ++used;
    w.mean_delta = used > 0 ? w.mean_delta / static_cast<double>(used) : std::nan("");
    out.counts.push_back(w);
  }
  return out;
}

std::vector<Table> baseline_win_tables(const AnalysisContext& ctx, const BaselineWins& wins) {
  std::vector<Table> out;
  {
    Table t;
    t.id = "baseline_wins";
    t = paired_analysis_table(
        ctx, wins.comparisons, "Methods against the best-of-3 trivial baseline",
        "Δ = U(method) − U(best of random, knorm, streaming_llm), where the best baseline is "
        "chosen per (model, backend, benchmark, protocol, budget, task) by mean utility on the "
        "same instances (table baseline_choice; this selection favours the baseline, so Δ is "
        "conservative). Paired by instance, stratified by task. p: one-sided for Δ > 0 "
        "(bootstrap, or exact McNemar for 0/1 rows with fewer than 50 instances).",
        "u_method", "u_best_baseline");
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "baseline_win_counts";
    t.title = "Win counts against the best-of-3 trivial baseline";
    t.description =
        "Per benchmark, protocol and method: the rows of baseline_wins (one per model, backend "
        "and budget), how many have Δ̂ > 0 (wins), how many are significant at the family's "
        "α/m in favour of the method (significant wins) or of the baseline (significant losses), "
        "and the mean Δ̂ over the rows.";
    for (const char* name : {"benchmark", "protocol", "method"})
      t.add_column(name, ColumnType::text);
    t.add_column("rows", ColumnType::integer);
    t.add_column("wins", ColumnType::integer);
    t.add_column("significant_wins", ColumnType::integer, 0, true, "sig. wins");
    t.add_column("significant_losses", ColumnType::integer, 0, true, "sig. losses");
    t.add_column("mean_delta", ColumnType::real, 3, true, "mean Δ");
    t.add_column("partial_rows", ColumnType::integer, 0, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& w : wins.counts) {
      t.rows.push_back({ctx.label(Dim::benchmark, w.benchmark),
                        ctx.label(Dim::protocol, w.protocol), ctx.label(Dim::method, w.method),
                        w.rows, w.wins, w.significant_wins, w.significant_losses,
                        std::isfinite(w.mean_delta) ? Value{w.mean_delta} : Value{}, w.partial_rows,
                        w.partial_rows > 0});
    }
    add_family_attributes(t, wins.comparisons.family);
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "baseline_choice";
    t.title = "Best-of-3 trivial baseline per cell group";
    t.description =
        "For each (model, backend, benchmark, protocol, budget, task), the trivial baseline with "
        "the highest mean utility (ties: the earlier configuration name), and every baseline's "
        "mean. Partial: a baseline cell of the group is missing or failed, so the choice may "
        "change.";
    for (const char* name :
         {"model", "backend", "benchmark", "protocol", "budget", "task", "chosen"})
      t.add_column(name, ColumnType::text);
    t.add_column("chosen_mean", ColumnType::real, 3);
    t.add_column("all_means", ColumnType::text, 0, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& ch : wins.choices) {
      std::string all;
      double chosen_mean = std::nan("");
      for (const auto& [method, mean] : ch.means) {
        all += (all.empty() ? "" : "; ") + ctx.label(Dim::method, method) + "=" +
               (std::isfinite(mean) ? format_fixed(mean, 4) : std::string("n/a"));
        if (method == ch.chosen) chosen_mean = mean;
      }
      t.rows.push_back(
          {ctx.label(Dim::model, ch.model), ctx.label(Dim::backend, ch.backend),
           ctx.label(Dim::benchmark, ch.benchmark), ctx.label(Dim::protocol, ch.protocol),
           ctx.label(Dim::budget, ch.budget), ctx.frame.tasks[ch.task].name,
           ch.chosen < 0 ? std::string("none") : ctx.label(Dim::method, ch.chosen),
           std::isfinite(chosen_mean) ? Value{chosen_mean} : Value{}, all, ch.partial});
    }
    t.write_latex = false;
    t.markdown_row_limit = 30;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
