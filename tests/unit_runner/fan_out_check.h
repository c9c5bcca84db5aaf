// The fan-out == naive comparison shared by the unit runner's tests: runs both routes on one unit
// and checks, cell by cell, identical status, kept sets, kept digests (records schema 4, computed
// by suite/records/content_digests.h as `kvaudit run` computes them), kept counts/bytes and greedy
// outputs; and that moving one kept position of a cell changes its digest.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>

#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "suite/records/content_digests.h"

namespace kvaudit::unit::testing {

inline std::string describe_cell(const CellSpec& cell) {
  return (cell.method == nullptr ? std::string("full") : cell.method->name()) + " cr " +
         std::to_string(cell.budget.compression) + " " + std::string(protocol_name(cell.protocol));
}

// Runs both routes (keep_selections on) and compares them; returns the fan-out result.
// The digest callback `kvaudit run` installs (suite/run/unit_executor.cpp).
inline void install_kept_digest(UnitRunOptions& options, const model::ModelConfig& config) {
  const int layers = config.num_layers;
  const int heads = config.num_kv_heads;
  options.kept_digest = [layers, heads](const methods::Selection* selection, int boundary) {
    return selection != nullptr ? records::kept_digest(selection->kept)
                                : records::full_kept_digest(layers, heads, boundary);
  };
}

// `kept` with one position moved to a free neighbour (false when none is free).
inline bool move_one_position(methods::Selection& selection, int boundary) {
  for (auto& layer : selection.kept) {
    for (auto& head : layer) {
      for (std::size_t k = 0; k < head.size(); ++k) {
        const std::int32_t next = head[k] + 1;
        const bool free = next < boundary && (k + 1 == head.size() || head[k + 1] != next);
        if (free) {
          head[k] = next;
          return true;
        }
      }
    }
  }
  return false;
}

inline UnitResult expect_fan_out_equals_naive(cpu::CpuModel& model,
                                              const model::ModelWeights& weights,
                                              const UnitTokens& tokens,
                                              std::span<const CellSpec> cells,
                                              UnitRunOptions options, const std::string& where) {
  options.keep_selections = true;
  install_kept_digest(options, weights.config);
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
    EXPECT_EQ(a.kept_digest, b.kept_digest) << cell << ": kept digests differ";
    if (a.status == CellStatus::ok) {
      EXPECT_NE(a.kept_digest, 0u) << cell;
      const std::uint64_t want =
          a.selection ? records::kept_digest(a.selection->kept)
                      : records::full_kept_digest(weights.config.num_layers,
                                                  weights.config.num_kv_heads, a.boundary);
      EXPECT_EQ(a.kept_digest, want) << cell << ": digest is not that of the kept positions";
      if (a.selection) {
        methods::Selection moved = *a.selection;
        if (move_one_position(moved, a.boundary)) {
          EXPECT_NE(records::kept_digest(moved.kept), a.kept_digest)
              << cell << ": one moved position left the digest unchanged";
        }
      }
    }
    EXPECT_EQ(a.kept_entries, b.kept_entries) << cell;
    EXPECT_EQ(a.kept_bytes, b.kept_bytes) << cell;
    EXPECT_EQ(a.realised_retention, b.realised_retention) << cell;
    EXPECT_EQ(a.generated, b.generated) << cell << ": greedy outputs differ";
    EXPECT_EQ(a.stopped_on_stop_token, b.stopped_on_stop_token) << cell;
  }
  return fan_out;
}

// What decoding gives a cell: equal on every route and batch.
inline void expect_same_decode(const CellResult& a, const CellResult& b, const std::string& where) {
  EXPECT_EQ(a.status, b.status) << where << ": " << a.error << " / " << b.error;
  EXPECT_EQ(a.error, b.error) << where;
  EXPECT_EQ(a.selection.has_value(), b.selection.has_value()) << where;
  if (a.selection && b.selection) {
    EXPECT_TRUE(a.selection->kept == b.selection->kept) << where << ": prefill kept sets differ";
  }
  EXPECT_EQ(a.kept_bytes, b.kept_bytes) << where;
  EXPECT_EQ(a.generated, b.generated) << where << ": greedy outputs differ";
  EXPECT_EQ(a.stopped_on_stop_token, b.stopped_on_stop_token) << where;
  EXPECT_EQ(a.peak_kv_bytes, b.peak_kv_bytes) << where;
  EXPECT_EQ(a.final_kv_bytes, b.final_kv_bytes) << where;
  EXPECT_EQ(a.decode_compressions, b.decode_compressions) << where;
  EXPECT_EQ(std::isnan(a.compression_seconds), std::isnan(b.compression_seconds)) << where;
}

}  // namespace kvaudit::unit::testing
