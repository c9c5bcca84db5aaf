// The cost analysis: accuracy against kept bytes and time per cell, with Pareto fronts (see
// cost_analysis.h).
#include "suite/reduce/cost_analysis.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include "suite/records/cell_record.h"
#include "suite/reduce/pareto_front.h"

namespace kvaudit::reduce {
namespace {

using CostGroupKey =
    std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t, std::int16_t,
               std::uint16_t>;  // model, backend, benchmark, protocol, method, budget
using PanelKey = std::tuple<std::uint16_t, std::uint8_t, std::uint16_t, std::uint8_t>;

struct GroupSums {
  CostRow row;
  double score = 0, kept = 0, peak = 0, total = 0;
  std::int64_t peak_n = 0;
  std::array<double, kCostSteps.size()> steps{};
  std::set<std::string> devices;
  std::set<std::int32_t> threads;
};

// A record carries costs when its prefill share was measured (every cell the fan-out ran has one;
// records of schema versions before 5 have NaN).
bool has_costs(const records::CellRecord& r) { return std::isfinite(r.cell_prefill_ms); }

std::array<double, kCostSteps.size()> step_times(const records::CellRecord& r) {
  const std::array<double, kCostSteps.size()> raw{
      r.cell_prefill_ms, r.cell_capture_ms, r.cell_extra_pass_ms, r.cell_select_ms,
      r.cell_evict_ms,   r.cell_feed_ms,    r.cell_decode_ms};
  std::array<double, kCostSteps.size()> out{};
  for (std::size_t s = 0; s < raw.size(); ++s) out[s] = std::isfinite(raw[s]) ? raw[s] : 0.0;
  return out;
}

template <typename T>
std::string joined(const std::set<T>& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += "+";
    if constexpr (std::is_same_v<T, std::string>) {
      out += v;
    } else {
      out += std::to_string(v);
    }
  }
  return out;
}

}  // namespace

std::string shared_cost_names(std::uint32_t bits) {
  // select and evict: a reuse cell's one selection and eviction, shared by its questions.
  static constexpr std::array<std::pair<std::uint32_t, const char*>, 7> names{{
      {records::kSharedPrefill, "prefill"},
      {records::kSharedCapture, "capture"},
      {records::kSharedExtraPass, "extra_pass"},
      {records::kSharedFeed, "feed"},
      {records::kSharedDecode, "decode"},
      {records::kSharedSelect, "select"},
      {records::kSharedEvict, "evict"},
  }};
  std::string out;
  for (const auto& [bit, name] : names) {
    if ((bits & bit) == 0) continue;
    if (!out.empty()) out += "+";
    out += name;
  }
  return out;
}

CostAnalysis compute_costs(const AnalysisContext& ctx) {
  std::map<CostGroupKey, GroupSums> groups;
  CostAnalysis out;
  for (const FrameCell& c : ctx.frame.cells) {
    GroupSums& g = groups[{c.model, c.backend, c.benchmark, c.protocol, c.method, c.budget}];
    if (c.state == CellState::failed || c.state == CellState::missing) g.row.partial = true;
    if (c.state != CellState::ok || c.record == nullptr) continue;
    const records::CellRecord& r = *c.record;
    ++g.row.n;
    ++out.ok_cells;
    g.score += c.score;
    g.kept += static_cast<double>(r.kept_bytes);
    if (r.peak_kv_bytes > 0) {
      g.peak += static_cast<double>(r.peak_kv_bytes);
      ++g.peak_n;
    }
    if (!has_costs(r)) continue;
    ++g.row.n_costed;
    ++out.costed_cells;
    const auto steps = step_times(r);
    for (std::size_t s = 0; s < steps.size(); ++s) {
      g.steps[s] += steps[s];
      g.total += steps[s];
    }
    g.row.shared_costs |= r.shared_costs;
    if (r.device != records::ComputeDevice::unknown) {
      g.devices.emplace(records::enum_name(r.device));
    }
    if (r.threads > 0) g.threads.insert(r.threads);
  }
  const auto mean = [](double sum, std::int64_t n) {
    return n > 0 ? sum / static_cast<double>(n) : std::nan("");
  };
  std::map<PanelKey, std::vector<std::size_t>> panels;
  for (auto& [key, g] : groups) {
    CostRow r = g.row;
    std::tie(r.model, r.backend, r.benchmark, r.protocol, r.method, r.budget) = key;
    r.accuracy = mean(g.score, r.n);
    r.kept_bytes = mean(g.kept, r.n);
    r.peak_kv_bytes = mean(g.peak, g.peak_n);
    r.total_ms = mean(g.total, r.n_costed);
    for (std::size_t s = 0; s < g.steps.size(); ++s) r.step_ms[s] = mean(g.steps[s], r.n_costed);
    r.devices = joined(g.devices);
    r.threads = joined(g.threads);
    r.partial = r.partial || r.n_costed < r.n;
    panels[{r.model, r.backend, r.benchmark, r.protocol}].push_back(out.rows.size());
    out.rows.push_back(std::move(r));
  }
  for (const auto& [panel, members] : panels) {
    std::vector<ParetoPoint> by_bytes, by_time;
    for (const std::size_t i : members) {
      by_bytes.push_back({out.rows[i].kept_bytes, out.rows[i].accuracy});
      by_time.push_back({out.rows[i].total_ms, out.rows[i].accuracy});
    }
    const std::vector<bool> front_bytes = pareto_front(by_bytes);
    const std::vector<bool> front_time = pareto_front(by_time);
    for (std::size_t k = 0; k < members.size(); ++k) {
      out.rows[members[k]].front_bytes = front_bytes[k];
      out.rows[members[k]].front_time = front_time[k];
    }
  }
  return out;
}

std::string cost_section_intro(const CostAnalysis& costs) {
  if (!costs.has_costs()) {
    return "The records carry no costs: they were written by shards of schema version 4 or "
           "earlier, before kvaudit measured per-cell costs (docs/RECORDS.md §Costs), so this "
           "section shows no numbers. Rerun the study with this kvaudit to get them.";
  }
  std::string intro =
      "Accuracy against what it cost, from the records: mean kept KV bytes per cell and mean "
      "time per cell (the cell's own selection and eviction plus its apportioned shares of the "
      "unit's prefill, the capture views, extra passes, and the batched feed and decode). The "
      "Pareto front (no other method and budget is at most as costly and at least as accurate) "
      "is marked per (model, backend, benchmark, protocol). Times are wall-clock on the device "
      "and thread count in the table: compare them within one study, not across machines.";
  if (costs.costed_cells < costs.ok_cells) {
    intro += " **" + std::to_string(costs.ok_cells - costs.costed_cells) + " of " +
             std::to_string(costs.ok_cells) +
             " scored cells come from older shards without costs**: their rows' times are over "
             "the n_costed cells that have them (marked partial).";
  }
  return intro;
}

std::vector<Table> cost_tables(const AnalysisContext& ctx, const CostAnalysis& costs) {
  if (!costs.has_costs()) return {};
  Table t;
  t.id = "cost";
  t.title = "Cost per cell: accuracy vs kept KV bytes and vs time, Pareto fronts marked";
  t.description =
      "Per (model, backend, benchmark, protocol, method, budget): mean utility over the ok cells "
      "(n), mean kept KV bytes after eviction (kept_bytes), mean bytes of the cell's cache at "
      "its largest, after decoding (peak_kv_bytes), and the mean time per cell in milliseconds "
      "(time_ms = prefill + capture + extra_pass + select + evict + feed + decode over the "
      "n_costed "
      "cells whose records carry costs; a step the cell does not have counts 0). Shared steps "
      "(the unit's prefill, a boundary's capture views, an extra pass, batched feed and decode) "
      "are the cell's apportioned share (shared lists them; docs/RECORDS.md §Costs has the "
      "rules). front_bytes / front_time: on the Pareto front of (kept bytes, utility) / (time, "
      "utility) among the method and budget points, full KV included, of the same (model, "
      "backend, benchmark, protocol): no other point is at most as costly and at least as "
      "accurate while better in one. Times depend on the device and threads they were measured "
      "with (device, threads).";
  for (const char* name : {"model", "backend", "benchmark", "protocol", "method", "budget"})
    t.add_column(name, ColumnType::text);
  t.add_column("n", ColumnType::integer);
  t.add_column("n_costed", ColumnType::integer, 0, false);
  t.add_column("mean", ColumnType::real, 3, true, "utility");
  t.add_column("kept_bytes", ColumnType::real, 0, true, "kept bytes");
  t.add_column("peak_kv_bytes", ColumnType::real, 0, false, "peak bytes");
  t.add_column("time_ms", ColumnType::real, 1, true, "time (ms)");
  for (const char* step : kCostSteps)
    t.add_column(std::string(step) + "_ms", ColumnType::real, 2, false);
  t.add_column("front_bytes", ColumnType::flag, 0, true, "front (bytes)");
  t.add_column("front_time", ColumnType::flag, 0, true, "front (time)");
  t.add_column("shared", ColumnType::text, 0, false);
  t.add_column("device", ColumnType::text, 0, false);
  t.add_column("threads", ColumnType::text, 0, false);
  t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
  for (const CostRow& r : costs.rows) {
    std::vector<Value> row{ctx.label(Dim::model, r.model),
                           ctx.label(Dim::backend, r.backend),
                           ctx.label(Dim::benchmark, r.benchmark),
                           ctx.label(Dim::protocol, r.protocol),
                           ctx.label(Dim::method, r.method),
                           ctx.label(Dim::budget, r.budget),
                           r.n,
                           r.n_costed,
                           finite_or_empty(r.accuracy),
                           finite_or_empty(r.kept_bytes),
                           finite_or_empty(r.peak_kv_bytes),
                           finite_or_empty(r.total_ms)};
    for (const double step : r.step_ms) row.push_back(finite_or_empty(step));
    row.emplace_back(r.front_bytes);
    row.emplace_back(r.front_time);
    row.emplace_back(shared_cost_names(r.shared_costs));
    row.emplace_back(r.devices);
    row.emplace_back(r.threads);
    row.emplace_back(r.partial);
    t.rows.push_back(std::move(row));
  }
  t.add_attribute("time", "mean per cell of the cell's own and apportioned step times (ms)");
  t.add_attribute("front", "non-dominated: higher utility, lower kept bytes / lower time");
  t.write_latex = t.rows.size() <= 400;
  return {std::move(t)};
}

}  // namespace kvaudit::reduce
