// UnitExecutor: runs one manifest unit (model, backend, benchmark, task, instance) end to end and
// returns one CellRecord per requested cell — the bridge between the study plan
// (suite/manifest/expansion.h) and the unit runner (runners/unit/unit_runner.h).
//
// For a unit it:
//   1. loads the manifest's model (loaded_model.h: weights at the manifest's dtype, tokenizer, the
//      named chat template, stop ids = EOS ids + the template's end-of-turn token) and its engine
//      for the unit's attention backend on the unit's device: the CUDA backend on the current GPU
//      with options.use_gpu and a bf16 model, the CPU backend otherwise. One model is held at a
//      time (a rank should run its units grouped by model); a model that fails to load is
//      remembered and fails its later units without another attempt;
//   2. builds the benchmark instance with the evaluated model's tokenizer and chat template
//      (unit_instance.h): RULER generated natively (seeded by the study seed, task, length,
//      index; sized with the benchmark's generation_tokenizer when set), LongBench read from its
//      JSONL with middle truncation to the benchmark's length;
//   3. runs the tokenizer check (excluded instance → every cell gets status `excluded` and the
//      reason in `error`; token counts are still filled);
//   4. tokenizes context | question | suffix separately (the kvpress split;
//      docs/design/protocols.md) and builds one unit::CellSpec per cell (methods from
//      methods/method_factory.h, built once per config; retention r → compression 1 − r;
//      thresholds for threshold methods; full-KV cells have no method);
//   5. runs the fan-out (unit::run_unit, the same code on either device; max_new_tokens = the
//      instance's budget), decodes each answer without its final stop id (skip_special_tokens,
//      as kvpress), scores it with the task's metric (suite/benchmarks/metrics/task_scoring.h)
//      and fills the records.
// Record fields: compression and retention are both set for ratio cells (NaN otherwise),
// threshold for threshold cells; kept_tokens = KV entries kept over layers and heads; full_bytes =
// the boundary's entries × 2 × head_dim × (2 bytes bf16 | 4 bytes f32); realised_retention =
// kept_bytes / full_bytes; t_start_ns / t_end_ns = the unit's wall-clock span (system clock),
// prefill_ms = the unit's shared prefill, decode_ms = its batched feed + decode (shared by the
// cells of the unit, whole); the schema-5 costs cell_*_ms = the cell's own or apportioned share
// of each step (unit::CellResult, runners/unit/cost_shares.h; shared_costs flags the shares;
// cell_select_ms NaN for full KV), peak_kv_bytes = the cell's cache after decoding, device and
// threads = where the fan-out ran; score NaN unless `ok`.
// Every non-timing field (timings: the two above, the cell_*_ms costs, shared_costs — which
// cells shared a step depends on the cells run together — device and threads) depends only on the
// manifest and the unit/cell (never on rank count, order, which other cells run with it, or what
// the executor ran before). A failure that concerns one cell (its method cannot be built, throws,
// or its score cannot be computed) fails that cell; one that concerns the whole unit (model file
// unreadable, instance generation error) fails all its cells with status `error` (`oom` for
// std::bad_alloc) and the message; only programming errors (cells of another unit) propagate.
//
// Thread safety: one executor per rank; execute() is not reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "methods/method.h"
#include "runners/unit/unit_runner.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/cell_record.h"

namespace kvaudit::run {

struct UnitExecutorOptions {
  std::int32_t rank = 0;     // written into the records
  std::int32_t attempt = 1;  // written into the records
  // Cells decoded together at most (unit::UnitRunOptions::max_batch_cells; 0 = all).
  int max_batch_cells = 0;
  // Run units on the CUDA backend (the calling thread's current device, see cuda::use_device)
  // when the model's dtype is bf16; f32 models, and builds without CUDA, use the CPU backend.
  bool use_gpu = false;
  // The configured runtime context (tokens), if any: the tokenizer check's limit is
  // min(max_position_embeddings, this); instances over it are `excluded`.
  std::optional<std::int64_t> max_context;
};

// What `kvaudit inspect --selections` needs beyond the records: the unit's prompt ids and each
// requested cell's kept positions.
struct UnitTrace {
  unit::UnitTokens
      tokens;  // context | question | suffix, as the records' prompt_digest hashed them
  int layers = 0;
  int kv_heads = 0;
  // Per requested cell (the order given to execute): the kept positions of an evicting cell that
  // ran; nullopt for a full-KV cell (it keeps 0..boundary−1 everywhere) or one that failed.
  std::vector<std::optional<methods::Selection>> selections;
  std::vector<int> boundaries;  // per requested cell: b (0 when it did not run)
};

class UnitExecutor {
 public:
  // `manifest` and `expansion` must outlive the executor. Paths in the manifest are resolved as
  // the manifest parser resolved them (relative to the manifest file).
  UnitExecutor(const manifest::Manifest& manifest, const manifest::Expansion& expansion,
               UnitExecutorOptions options);
  ~UnitExecutor();
  UnitExecutor(const UnitExecutor&) = delete;
  UnitExecutor& operator=(const UnitExecutor&) = delete;

  // Runs `unit` for the given cells (all belonging to it, in any order; typically the cells not
  // yet recorded). Returns one record per cell, in the order given; for a reuse unit one per
  // (cell, question), cell i's question j at i·k + j (k = the context's questions), or one per
  // cell when the unit failed before its questions were known.
  // With `trace`, also fills it (the unit's prompt and each cell's kept positions; the selections
  // are kept in memory for the whole unit, so only for a few cells).
  std::vector<records::CellRecord> execute(const manifest::Unit& unit,
                                           std::span<const manifest::Cell* const> cells,
                                           UnitTrace* trace = nullptr);

  // A cost estimate for scheduling: proportional to prompt length × (cells + decode share).
  static double estimated_cost(const manifest::Manifest& manifest, const manifest::Unit& unit);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvaudit::run
