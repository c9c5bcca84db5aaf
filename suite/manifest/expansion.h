// Expansion of a manifest into units and cells (docs/MANIFEST.md, `[[grids]]`).
//   unit = (model, attention backend, benchmark, task, instance): the unit of scheduling (one
//          prefill); a grid listing the protocol "reuse" adds a reuse unit per such tuple whose
//          instance is a context with several questions (RULER niah_multiquery's multi-question
//          form; a LongBench context group), holding the grid's reuse cells;
//   cell = unit x (method config, budget, protocol), plus the full-KV reference under each
//          protocol: the unit of records.
// Ids are the first 16 hex digits (as a u64) of the SHA-256 of the canonical JSON tuple; they
// depend on content only (model/benchmark identity, method content, budget, protocol), never on
// positions, rank or order. Grids that overlap produce each cell once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/attention_backend.h"
#include "base/protocol.h"
#include "suite/manifest/instance_split.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

enum class BudgetKind : std::int8_t { none = 0, compression = 1, retention = 2, threshold = 3 };
const char* budget_kind_name(BudgetKind k);

struct Unit {
  std::uint64_t id = 0;
  std::uint16_t model = 0;      // index into Manifest::models
  std::uint16_t benchmark = 0;  // index into Manifest::benchmarks
  std::uint16_t task = 0;       // index into that benchmark's tasks
  AttentionBackend attention_backend = AttentionBackend::eager;
  Split split = Split::none;
  std::int64_t instance = 0;  // reuse: the context (RULER instance; LongBench context group)
  std::uint32_t n_cells = 0;
  // A reuse unit (docs/design/reuse.md): its cells are the grid's reuse cells, one compression per
  // context serving each of its questions; its tuple has "reuse": true (other units' tuples have
  // no such key, so their ids are those of before).
  bool reuse = false;
};

struct Cell {
  std::uint64_t id = 0;
  std::uint32_t unit = 0;    // index into Expansion::units
  std::int16_t method = -1;  // index into Manifest::methods; -1 = full-KV reference
  Protocol protocol = Protocol::query_agnostic;
  BudgetKind budget_kind = BudgetKind::none;
  double budget = 0;  // the ratio or threshold as declared (0 for full-KV)
  // The grid whose `decoding` table the cell decodes under (index into Manifest::grids), or -1:
  // no decode-time compression. Part of the cell's content (its tuple has "decoding" then).
  std::int16_t decoding_grid = -1;
};

// How one grid's cell count comes about, for the plan printout.
struct GridCount {
  std::string grid;
  std::int64_t models = 0, backends = 0, instances = 0;  // instances: sum of tasks x instances
  std::int64_t ratio_methods = 0, ratios = 0, threshold_methods = 0, thresholds = 0;
  std::int64_t protocols = 0;
  std::int64_t units = 0;
  std::int64_t cells_per_unit = 0;  // (ratio_methods*ratios + threshold_methods*thresholds + 1)
                                    // * protocols
  std::int64_t cells = 0;           // units * cells_per_unit (before merging grids)
  // Reuse units (protocol "reuse"): scheduled apart from the tuple's other protocols' unit; each
  // of their cells writes one record per question of its context.
  std::int64_t reuse_units = 0;
};

struct Expansion {
  std::vector<Unit> units;  // sorted by id
  std::vector<Cell> cells;  // sorted by id
  std::vector<GridCount> grids;
  std::int64_t overlapping_cells = 0;  // cells produced by more than one grid (counted once)
};

// The most cells one study may expand to (32 bytes each in memory; the seed-001 audit has 643,800).
inline constexpr std::int64_t kMaxCells = 50'000'000;

// An upper bound on the number of cells (before merging overlapping grids), computed without
// expanding.
double estimated_cells(const Manifest& m);

// Throws InputError when estimated_cells exceeds kMaxCells.
Expansion expand(const Manifest& m);

// Canonical JSON tuples (exposed so tests can check ids against an independent computation).
std::string unit_tuple(const Manifest& m, const Unit& u);
std::string cell_tuple(const Manifest& m, const Unit& u, const Cell& c);

// The key of a cell's random draws (methods/random.h: SelectionContext::cell_key): the id of the
// cell tuple whose unit has no attention backend — {"benchmark", "instance", "model", "task"} —
// so the cells a paired comparison pairs across backends (same unit content, method, budget and
// protocol) draw the same numbers. The device was never part of it. Before records schema
// version 4 the key was the cell id, which includes the backend.
std::string selection_tuple(const Manifest& m, const Unit& u, const Cell& c);
std::uint64_t selection_key(const Manifest& m, const Unit& u, const Cell& c);

// Names for tables and records.
std::string cell_method_name(const Manifest& m, const Cell& c);  // config name, or "full"
std::string unit_task(const Manifest& m, const Unit& u);

}  // namespace kvaudit::manifest
