// Backend confound: full-KV sdpa vs eager, inter-method gaps, ranking agreement (see
// backend_confound.h).
#include "suite/reduce/backend_confound.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "statistics/kendall_tau.h"

namespace kvaudit::reduce {
namespace {

struct BackendMean {
  double sum = 0;
  std::int64_t n = 0;
  bool unusable = false;
  double mean() const { return n > 0 ? sum / static_cast<double>(n) : std::nan(""); }
};

std::string join_ranking(const AnalysisContext& ctx, const std::vector<std::int16_t>& methods,
                         const std::vector<double>& means) {
  std::vector<std::size_t> order(methods.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return means[a] > means[b]; });
  std::string out;
  for (std::size_t i : order)
    out += (out.empty() ? "" : " > ") + ctx.label(Dim::method, methods[i]);
  return out;
}

}  // namespace

BackendConfound compute_backend_confound(const AnalysisContext& ctx) {
  const StudyFrame& f = ctx.frame;
  BackendConfound out;
  PairAccumulator pairs;
  // Method means per (model, benchmark, protocol, budget, method, backend).
  std::map<std::tuple<std::uint16_t, std::uint16_t, std::uint8_t, std::uint16_t, std::int16_t,
                      std::uint8_t>,
           BackendMean>
      means;
  for (const FrameCell& c : f.cells) {
    if (c.method < 0) {
      if (c.backend != kSdpa) continue;
      const auto partner = ctx.lookup.on_backend(c, kEager);
      if (!partner) continue;
      pairs.add({c.model, c.benchmark, c.protocol}, c, f.cells[*partner]);
      continue;
    }
    BackendMean& acc = means[{c.model, c.benchmark, c.protocol, c.budget, c.method, c.backend}];
    if (c.state == CellState::ok) {
      acc.sum += c.score;
      ++acc.n;
    } else if (c.state != CellState::excluded) {
      acc.unusable = true;
    }
  }
  out.full_kv = run_paired_analysis(ctx, pairs, "backend_confound", "backend_confound",
                                    {Dim::model, Dim::benchmark, Dim::protocol}, true);

  // Inter-method gaps under sdpa, per full-KV row.
  for (const auto& row : out.full_kv.rows) {
    std::vector<double> gaps;
    std::map<std::uint16_t, std::vector<double>> by_budget;
    for (const auto& [key, acc] : means) {
      const auto& [model, benchmark, protocol, budget, method, backend] = key;
      if (model != row.key[0] || benchmark != row.key[1] || protocol != row.key[2] ||
          backend != kSdpa || acc.n == 0)
        continue;
      by_budget[budget].push_back(acc.mean());
    }
    for (const auto& [budget, values] : by_budget)
      for (std::size_t i = 0; i < values.size(); ++i)
        for (std::size_t j = i + 1; j < values.size(); ++j)
          gaps.push_back(std::fabs(values[i] - values[j]));
    InterMethodGaps g;
    g.pairs = static_cast<std::int64_t>(gaps.size());
    if (gaps.empty()) {
      g.median_abs_gap = g.max_abs_gap = g.fraction_below_backend = std::nan("");
    } else {
      std::sort(gaps.begin(), gaps.end());
      const std::size_t n = gaps.size();
      g.median_abs_gap = n % 2 ? gaps[n / 2] : (gaps[n / 2 - 1] + gaps[n / 2]) / 2;
      g.max_abs_gap = gaps.back();
      if (row.result.empty) {
        g.fraction_below_backend = std::nan("");
      } else {
        const double b = std::fabs(row.result.estimate);
        const auto below = std::lower_bound(gaps.begin(), gaps.end(), b) - gaps.begin();
        g.fraction_below_backend = static_cast<double>(below) / static_cast<double>(n);
      }
    }
    out.gaps.push_back(g);
  }

  // Kept sets across backends per (model, benchmark, protocol, method, budget).
  std::map<std::tuple<std::uint16_t, std::uint16_t, std::uint8_t, std::int16_t, std::uint16_t>,
           SelectionAgreement>
      selections;
  for (const FrameCell& c : f.cells) {
    if (c.method < 0 || c.backend != kSdpa || c.state != CellState::ok) continue;
    // A reuse cell's kept set is the cell's, the same in its k records: count it once.
    if (c.question > 0) continue;
    const auto partner = ctx.lookup.on_backend(c, kEager);
    if (!partner) continue;
    const FrameCell& e = f.cells[*partner];
    if (e.state != CellState::ok || c.record == nullptr || e.record == nullptr) continue;
    SelectionAgreement& s = selections[{c.model, c.benchmark, c.protocol, c.method, c.budget}];
    std::tie(s.model, s.benchmark, s.protocol, s.method, s.budget) =
        std::tuple{c.model, c.benchmark, c.protocol, c.method, c.budget};
    ++s.pairs;
    if (c.record->kept_digest == 0 || e.record->kept_digest == 0) {
      ++s.unknown;
    } else if (c.record->kept_digest == e.record->kept_digest) {
      ++s.identical;
    } else {
      ++s.different;
    }
  }
  for (auto& [key, s] : selections) out.selections.push_back(s);

  // Ranking agreement per (model, benchmark, protocol, budget).
  std::map<std::tuple<std::uint16_t, std::uint16_t, std::uint8_t, std::uint16_t>,
           std::map<std::int16_t, std::pair<const BackendMean*, const BackendMean*>>>
      groups;
  for (const auto& [key, acc] : means) {
    const auto& [model, benchmark, protocol, budget, method, backend] = key;
    auto& slot = groups[{model, benchmark, protocol, budget}][method];
    (backend == kSdpa ? slot.first : slot.second) = &acc;
  }
  for (const auto& [key, per_method] : groups) {
    RankingAgreement ra;
    std::tie(ra.model, ra.benchmark, ra.protocol, ra.budget) = key;
    bool both_backends = false;
    for (const auto& [method, accs] : per_method) {
      if (accs.first == nullptr || accs.second == nullptr) continue;
      both_backends = true;
      if (accs.first->unusable || accs.second->unusable) ra.partial = true;
      if (accs.first->n == 0 || accs.second->n == 0) continue;
      ra.methods.push_back(method);
      ra.sdpa_means.push_back(accs.first->mean());
      ra.eager_means.push_back(accs.second->mean());
    }
    if (!both_backends) continue;
    ra.tau_b = ra.p_value = std::nan("");
    if (ra.methods.size() >= 2) {
      const auto k = stats::kendall_tau_b(ra.sdpa_means, ra.eager_means);
      ra.tau_b = k.tau_b;
      ra.p_value = k.p_value;
      ra.exact_p = k.exact_p;
    }
    out.rankings.push_back(std::move(ra));
  }
  return out;
}

std::vector<Table> backend_confound_tables(const AnalysisContext& ctx, const BackendConfound& bc) {
  std::vector<Table> out;
  {
    Table t = paired_analysis_table(
        ctx, bc.full_kv, "Backend confound: uncompressed model, sdpa vs eager",
        "Δ = U(full KV, sdpa) − U(full KV, eager): what swapping the attention backend of the "
        "uncompressed model does to its utility, paired by instance and stratified by task. "
        "Beside it, the gaps between compressed methods it competes with (under sdpa, all "
        "method pairs within each budget): their median and maximum absolute value and the "
        "fraction of them smaller than |Δ|. p: one-sided for Δ > 0; p_two_sided_bootstrap in the "
        "CSV.",
        "u_sdpa", "u_eager");
    t.add_column("method_gap_pairs", ColumnType::integer, 0, false);
    t.add_column("median_method_gap", ColumnType::real, 3, true, "median |gap|");
    t.add_column("max_method_gap", ColumnType::real, 3, false);
    t.add_column("fraction_gaps_below", ColumnType::real, 3, true, "gaps < |Δ|");
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const InterMethodGaps& g = bc.gaps[i];
      auto v = [](double x) { return std::isfinite(x) ? Value{x} : Value{}; };
      t.rows[i].insert(t.rows[i].end(), {g.pairs, v(g.median_abs_gap), v(g.max_abs_gap),
                                         v(g.fraction_below_backend)});
    }
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "backend_rankings";
    t.title = "Method rankings under sdpa and eager";
    t.description =
        "Per model, benchmark, protocol and budget: Kendall's τ-b between the compressed "
        "methods' mean utilities under sdpa and under eager (1: same order; −1: reversed), its "
        "two-sided p (exact without ties for up to 33 methods, else the normal approximation) and "
        "both rankings. No multiplicity correction (descriptive).";
    for (const char* name : {"model", "benchmark", "protocol", "budget"})
      t.add_column(name, ColumnType::text);
    t.add_column("methods", ColumnType::integer);
    t.add_column("tau_b", ColumnType::real, 3, true, "τ-b");
    t.add_column("p_value", ColumnType::pvalue, 4, true, "p");
    t.add_column("exact_p", ColumnType::flag, 0, false);
    t.add_column("ranking_sdpa", ColumnType::text, 0, false);
    t.add_column("ranking_eager", ColumnType::text, 0, false);
    t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
    for (const auto& r : bc.rankings) {
      auto v = [](double x) { return std::isfinite(x) ? Value{x} : Value{}; };
      t.rows.push_back({ctx.label(Dim::model, r.model), ctx.label(Dim::benchmark, r.benchmark),
                        ctx.label(Dim::protocol, r.protocol), ctx.label(Dim::budget, r.budget),
                        static_cast<std::int64_t>(r.methods.size()), v(r.tau_b), v(r.p_value),
                        r.exact_p, join_ranking(ctx, r.methods, r.sdpa_means),
                        join_ranking(ctx, r.methods, r.eager_means), r.partial});
    }
    out.push_back(std::move(t));
  }
  {
    Table t;
    t.id = "backend_selections";
    t.title = "Kept sets under sdpa and eager";
    t.description =
        "Per model, benchmark, protocol, method and budget: of the requests with an ok cell "
        "under both backends, how many kept exactly the same positions in every layer and KV "
        "head (equal kept digests). `identical` means the backend changed only how the kept "
        "cache was used, so a score difference of that row is a scoring effect; `differs` means "
        "the backend also changed what was kept (attention-based scores read the backend's "
        "attention weights); `unknown` means records without digests (written before records "
        "schema version 4).";
    for (const char* name : {"model", "benchmark", "protocol", "method", "budget"})
      t.add_column(name, ColumnType::text);
    t.add_column("pairs", ColumnType::integer);
    t.add_column("kept_identical", ColumnType::integer, 0, true, "identical");
    t.add_column("kept_different", ColumnType::integer, 0, true, "different");
    t.add_column("kept_unknown", ColumnType::integer, 0, false);
    t.add_column("selection", ColumnType::text, 0, true, "kept sets");
    for (const auto& s : bc.selections) {
      const char* verdict = s.unknown > 0 ? "unknown" : s.different > 0 ? "differs" : "identical";
      t.rows.push_back({ctx.label(Dim::model, s.model), ctx.label(Dim::benchmark, s.benchmark),
                        ctx.label(Dim::protocol, s.protocol), ctx.label(Dim::method, s.method),
                        ctx.label(Dim::budget, s.budget), s.pairs, s.identical, s.different,
                        s.unknown, std::string(verdict)});
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kvaudit::reduce
