// What the methods cost (issue 19): per (model, backend, benchmark, protocol, method, budget), the
// mean utility against the mean kept KV bytes and against the mean time per cell, each with its
// Pareto front (pareto_front.h) among the (method, budget) points, full KV included, of one
// (model, backend, benchmark, protocol). Computed from the records alone (schema version 5 on:
// cell_record.h's cost members, docs/RECORDS.md §Costs):
//   accuracy    mean score over the ok cells (as accuracy_by_budget);
//   kept bytes  mean kept_bytes (the compressed cache before feeding) over the ok cells;
//   peak bytes  mean peak_kv_bytes (the cell's cache after decoding) over the ok cells that have
//   it; time        mean total cost per cell = cell_prefill_ms + cell_capture_ms +
//   cell_extra_pass_ms
//               + cell_select_ms + cell_evict_ms + cell_feed_ms + cell_decode_ms (a step the cell
//               does not have counts 0), over the ok cells with costs; the shared steps are the
//               cell's apportioned shares (shared_costs), so the times of a unit's cells add up to
//               the unit's measured time. The steps' means are in the table too.
// Reuse cells count once per record (per (context, question)): the record's select and evict
// times are its equal share of the cell's one selection and eviction (shared bits select, evict),
// so a reuse point's time is the cost per answered question, and its k records add up to the
// cell's measured time like the cells of a unit do.
// Records of older shards have no costs: a group without any is left out of the time front, and a
// study without any gets no cost tables or figures (the report says so instead).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "suite/reduce/analysis_context.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

// The steps of CostRow::step_ms, in this order.
inline constexpr std::array<const char*, 7> kCostSteps{"prefill", "capture", "extra_pass", "select",
                                                       "evict",   "feed",    "decode"};

struct CostRow {
  std::uint16_t model = 0;
  std::uint8_t backend = 0;
  std::uint16_t benchmark = 0;
  std::uint8_t protocol = 0;
  std::int16_t method = -1;
  std::uint16_t budget = 0;
  std::int64_t n = 0;         // ok cells
  std::int64_t n_costed = 0;  // of them, with schema-5 costs
  double accuracy = 0;        // NaN when n = 0
  double kept_bytes = 0;      // NaN when n = 0
  double peak_kv_bytes = 0;   // NaN when no ok cell reports it
  double total_ms = 0;        // NaN when n_costed = 0
  std::array<double, kCostSteps.size()> step_ms{};
  std::uint32_t shared_costs = 0;  // union of the cells' SharedCost bits
  std::string devices;             // "cpu", "cuda", "cpu+cuda"; "" when unknown
  std::string threads;             // e.g. "16", "8+16"; "" when unknown
  bool front_bytes = false;        // on the accuracy-vs-kept-bytes front
  bool front_time = false;         // on the accuracy-vs-time front
  bool partial = false;            // a failed or missing cell, or an ok cell without costs
};

struct CostAnalysis {
  std::vector<CostRow> rows;
  std::int64_t ok_cells = 0;
  std::int64_t costed_cells = 0;  // ok cells whose records carry costs (schema 5 on)
  bool has_costs() const { return costed_cells > 0; }
};

CostAnalysis compute_costs(const AnalysisContext& ctx);
// The table `cost` (empty when the study has no costs).
std::vector<Table> cost_tables(const AnalysisContext& ctx, const CostAnalysis& costs);
// The report's introduction to the cost section: what the numbers are, or, for a study whose
// records carry no costs (schema version before 5), that there are none to show.
std::string cost_section_intro(const CostAnalysis& costs);
// "prefill+capture+feed+decode" for SharedCost bits; "" for none.
std::string shared_cost_names(std::uint32_t bits);

}  // namespace kvaudit::reduce
