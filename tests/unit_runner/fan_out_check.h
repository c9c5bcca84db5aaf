// The fan-out == naive comparison shared by the unit runner's tests: runs both routes on one unit
// and checks, cell by cell, identical status, kept sets, kept counts/bytes and greedy outputs.
#pragma once

#include <gtest/gtest.h>

#include <span>
#include <string>

#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"

namespace kvaudit::unit::testing {

inline std::string describe_cell(const CellSpec& cell) {
  return (cell.method == nullptr ? std::string("full") : cell.method->name()) + " cr " +
         std::to_string(cell.budget.compression) + " " + std::string(protocol_name(cell.protocol));
}

// Runs both routes (keep_selections on) and compares them; returns the fan-out result.
inline UnitResult expect_fan_out_equals_naive(cpu::CpuModel& model,
                                              const model::ModelWeights& weights,
                                              const UnitTokens& tokens,
                                              std::span<const CellSpec> cells,
                                              UnitRunOptions options, const std::string& where) {
  options.keep_selections = true;
  const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
  const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
  EXPECT_EQ(fan_out.cells.size(), cells.size());
  EXPECT_EQ(naive.cells.size(), cells.size());
  for (std::size_t i = 0; i < cells.size() && i < fan_out.cells.size(); ++i) {
    const CellResult& a = fan_out.cells[i];
    const CellResult& b = naive.cells[i];
    const std::string cell =
        where + ": cell " + std::to_string(i) + " (" + describe_cell(cells[i]) + ")";
    EXPECT_EQ(a.status, b.status) << cell << ": " << a.error << " / " << b.error;
    EXPECT_EQ(a.error, b.error) << cell;
    EXPECT_EQ(a.boundary, b.boundary) << cell;
    EXPECT_EQ(a.selection.has_value(), b.selection.has_value()) << cell;
    if (a.selection && b.selection) {
      EXPECT_TRUE(a.selection->kept == b.selection->kept) << cell << ": kept sets differ";
    }
    EXPECT_EQ(a.kept_entries, b.kept_entries) << cell;
    EXPECT_EQ(a.kept_bytes, b.kept_bytes) << cell;
    EXPECT_EQ(a.realised_retention, b.realised_retention) << cell;
    EXPECT_EQ(a.generated, b.generated) << cell << ": greedy outputs differ";
    EXPECT_EQ(a.stopped_on_stop_token, b.stopped_on_stop_token) << cell;
  }
  return fan_out;
}

}  // namespace kvaudit::unit::testing
