// The unit runner: one unit (model, attention backend, benchmark, task, instance) → one result per
// cell, on any InferenceEngine (inference_engine.h): the CPU backend and the CUDA backend run this
// same code; nothing here chooses by device.
//
// Fan-out route, run_unit (docs/design/protocols.md §Fan-out; the kvpress pipeline):
//   1. prefill prefix+context+question ONCE (Lq tokens) with the engine's PrefillCapture at the
//      boundaries the cells need: Lc = end of context (query-agnostic), Lq = end of question
//      (query-aware);
//   2. per cell: its kept sets at its protocol's boundary b — the capture's device fast path
//      where it has one for the method (PrefillCapture::device_selection: the GPU scorers), else
//      Method::select on the capture's LayerCapture views;
//   3. per cell: fork the prefilled cache, truncate it to b (query-agnostic: the question's entries
//      go), retain() each (layer, KV head)'s kept positions;
//   4. feed the rest (query-agnostic: question + suffix; query-aware: suffix) to all cells of a
//      batch at once (prefill_batch), positions continuing at the ORIGINAL length b, then greedy
//      decode them together (greedy_decoding.h). Batches hold at most max_batch_cells cells and
//      what the engine's memory allows (InferenceEngine::max_concurrent_cells).
// A method with an extra pass (Method::extra_pass(), methods/extra_pass.h; KVzip) has it run in
// step 2 before its selection: on copies of the prefilled cache truncated to b, once per (boundary,
// pass key) for all cells that share it; each such cell gets an equal share of its time
// (extra_pass_seconds), and an engine that cannot run it (InferenceEngine::observed_pass) fails
// those cells.
// Costs: every cell gets its own or its apportioned share of each step's wall time (CellResult's
// *_seconds, shared_costs; the rules are cost_shares.h's) and its cache's peak bytes.
// Method::select runs in parallel over cells (OpenMP), so it must be safe to call concurrently (it
// is const; methods keep no per-call state); step 3 runs in parallel too where the engine allows
// it (concurrent_cache_ops). A full-KV cell (method == nullptr) follows the same steps without
// eviction. A cell whose method throws, or returns a selection the cache rejects, becomes a failed
// cell (status + message); the others carry on.
//
// Naive route, run_unit_naive: per cell its own prefill of the protocol's prefix (b tokens) with
// its own capture, the selection, retain, a prefill of the rest and a single-sequence greedy
// decode. It is the reference the fan-out must equal (tests/unit_runner).
//
// Reuse units (Protocol::reuse; docs/design/reuse.md): every cell is a reuse cell and the unit's
// questions are UnitTokens::reuse_questions. run_unit prefills the context alone (Lc tokens, so
// question_end = Lc) with the capture at b = Lc, selects once per cell as above, evicts once per
// cell into its template cache (a full-KV cell's template is the prefilled cache itself), and per
// (cell, question) row forks the template (the last row of an evicting cell takes it over) and
// feeds question j + suffix j; rows are batched and decoded as cells are (max_batch_cells counts
// rows). Results: one per (cell, question), cells in list order, questions 0 … k−1 consecutive;
// prefill and capture (and an extra pass) are shared by the rows as by cells, a cell's select and
// evict equally by its k rows (kSelectShare, kEvictShare), the row's fork adds to its evict time.
// run_unit_naive runs, per (cell, question), the query-agnostic naive route on the single-question
// unit (context, question j, suffix j).
//
// Decode-time compression (docs/design/decoding.md): a cell with a DecodingCell decodes through
// generate_greedy_compressing (its method and policy; SelectionContext seed and cell_key), on both
// routes and for reuse rows; in a batch the cells without one decode first, together, exactly as
// they would alone, then those with one together. Its compressions are its own cost
// (CellResult::compression_seconds); an engine without observed decode steps, a cache with ragged
// heads or a method failing while decoding fails that cell (those cells), not the unit.
//
// Suffix = the chat template's tail after the question + the answer prefix; it must not be empty
// (the last fed token's logits start the decode).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/protocol.h"
#include "methods/extra_pass.h"
#include "methods/method.h"
#include "runners/model/model_weights.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::unit {

// One question of a reuse unit with what follows it (docs/design/reuse.md).
struct QuestionTokens {
  std::vector<std::int32_t> question;  // may be empty
  std::vector<std::int32_t> suffix;  // template suffix + answer prefix (per question); ≥ 1 token
};

// A unit's tokens, tokenized separately and concatenated (docs/design/protocols.md §Prompt split).
struct UnitTokens {
  std::vector<std::int32_t> context;   // prefix (system/template head) + context; ≥ 1 token
  std::vector<std::int32_t> question;  // may be empty (Lc = Lq)
  std::vector<std::int32_t> suffix;    // template suffix + answer prefix; ≥ 1 token
  // The reconstruction prompt's ids for methods with an extra pass (KVzip; methods/extra_pass.h),
  // from the unit's tokenizer and chat template; unused (may stay empty) otherwise.
  methods::PassPrompt pass_prompt;
  // The context's questions when the unit's cells are reuse cells (Protocol::reuse): every reuse
  // cell answers each of them on its own copy of its compressed cache; `question` and `suffix`
  // above are then unused. Empty for units of the other protocols.
  std::vector<QuestionTokens> reuse_questions;
};

inline constexpr double kNoCost = std::numeric_limits<double>::quiet_NaN();

// A cell's decode-time compression (docs/design/decoding.md; kvpress DecodingPress, and with a
// prefill method PrefillDecodingPress): `method` cuts the cache back to policy.target_size entries
// per (layer, KV head) every policy.compression_interval decode steps. The method must outlive the
// run; it gets the cell's SelectionContext (seed, cell_key). Needs an engine that observes decode
// steps (InferenceEngine::decode_step_observed: the CPU engine); elsewhere the cell fails.
struct DecodingCell {
  const methods::Method* method = nullptr;  // not nullptr
  DecodingPolicy policy;
};

struct CellSpec {
  const methods::Method* method = nullptr;  // nullptr: the full-KV cell (nothing evicted)
  methods::Budget budget;
  Protocol protocol = Protocol::query_agnostic;
  // SelectionContext::cell_key: the key of the cell's random draws, the same for cells that must
  // keep the same positions (e.g. one cell under sdpa and eager: suite/manifest selection_key).
  std::uint64_t cell_key = 0;
  // Decode-time compression while it generates; nullptr: none (the cache keeps every generated
  // token). Must outlive the run.
  const DecodingCell* decoding = nullptr;
};

struct DecodeOptions {
  int max_new_tokens = 0;                    // ≥ 0
  std::vector<std::int32_t> stop_token_ids;  // any of them ends a cell's answer (and is in it)
};

struct UnitRunOptions {
  DecodeOptions decode;
  std::uint64_t seed = 0;        // the study seed (SelectionContext::seed)
  bool keep_selections = false;  // return each cell's kept sets (tests, kvaudit inspect)
  // When set: called once for every cell whose cache was built (the fan-out may call it from
  // several threads at once) with its kept positions — nullptr for a full-KV cell, which keeps
  // every position below its boundary — and the boundary b; the result is the cell's
  // CellResult::kept_digest (suite/records/content_digests.h supplies it).
  std::function<std::uint64_t(const methods::Selection* selection, int boundary)> kept_digest;
  // Cells decoded together at most (0: all). Bounds memory: each cell holds its own compacted copy
  // of the cache while decoding.
  int max_batch_cells = 0;
};

enum class CellStatus { ok, failed };

// The result of one cell, or under reuse of one (cell, question): a reuse cell has one per
// question of its context, its compression fields (selection, kept_*, realised_retention, the
// select share) equal in all of them; its evict share adds the record's own fork of the cell's
// compressed cache.
struct CellResult {
  int cell = 0;         // index into the cell list
  int question = 0;     // the question's index (UnitTokens::reuse_questions); 0 otherwise
  int n_questions = 1;  // reuse: the unit's questions; 1 otherwise
  CellStatus status = CellStatus::ok;
  std::string error;                            // why the cell failed (empty when ok)
  std::optional<methods::Selection> selection;  // with keep_selections, for evicting cells
  std::uint64_t kept_digest = 0;                // UnitRunOptions::kept_digest's value (else 0)
  std::vector<std::int32_t> generated;          // greedy ids (incl. a final stop id)
  bool stopped_on_stop_token = false;
  int boundary = 0;                    // b: the compression candidates are positions 0..b-1
  std::int64_t candidate_entries = 0;  // b · layers · KV heads
  std::int64_t kept_entries = 0;       // entries of the cache after eviction (before feeding)
  std::int64_t kept_bytes = 0;         // SequenceCache::kept_bytes() after eviction
  double realised_retention = 0.0;     // kept_entries / candidate_entries
  double select_seconds = 0.0;         // Method::select (or the capture's device fast path)
  double evict_seconds = 0.0;          // fork + truncate + retain (+ the cache edits)
  // The cell's costs in seconds of wall time: its own, or its share of a step it shared with other
  // cells (the bits of shared_costs, CostShare in cost_shares.h, say which); NaN = the cell has no
  // such step or did not reach it.
  double prefill_seconds = kNoCost;     // the prefill (capture hooks included)
  double capture_seconds = kNoCost;     // building the capture's host views at its boundary
  double extra_pass_seconds = kNoCost;  // its method's extra forward pass (KVzip)
  double feed_seconds = kNoCost;        // prefill of the rest on its compressed cache
  double decode_seconds = kNoCost;      // greedy decoding
  std::uint32_t shared_costs = 0;       // CostShare bits
  // SequenceCache::kept_bytes() of its cache after decoding: its largest size (the kept entries,
  // the fed tokens and the generated ones but the last); 0 when it did not get there.
  std::int64_t peak_kv_bytes = 0;
  // Its cache after the last decode step (= peak_kv_bytes unless compressed while decoding), and
  // the compression steps run while decoding (docs/design/decoding.md); 0 when not reached.
  std::int64_t final_kv_bytes = 0;
  int decode_compressions = 0;
  // Its decode-time compressions' wall time (the check of its cache before decoding, scoring and
  // retain), its own cost, not in decode_seconds; NaN for a cell without a decoding setting or that
  // did not decode.
  double compression_seconds = kNoCost;
};

struct UnitTimings {
  double prefill_seconds = 0.0;  // the shared prefill with capture (fan-out) / all prefills (naive)
  double capture_seconds = 0.0;  // building the capture's host views (per boundary)
  double extra_pass_seconds = 0.0;  // the extra passes (each (boundary, pass key) once)
  double select_seconds = 0.0;  // Σ over cells (fan-out: they overlap, threads run in parallel)
  double evict_seconds = 0.0;   // Σ over cells (likewise)
  double feed_seconds = 0.0;    // prefills of question/suffix on the compressed caches
  double decode_seconds = 0.0;  // greedy decoding
  double total_seconds = 0.0;   // wall time of the whole route
};

struct UnitResult {
  // In the order of the cell list; a reuse cell's results consecutive, question 0 … k−1.
  std::vector<CellResult> cells;
  UnitTimings timings;
  int context_end = 0;   // Lc
  int question_end = 0;  // Lq
  int threads = 0;       // OpenMP threads the route could use (omp_get_max_threads)
};

// The fan-out route. `weights` are the host weights `engine` was built from (methods read o_proj
// from them; the CUDA engine holds a bf16 copy of the same values). Throws std::invalid_argument
// for weights of another shape, an empty context or suffix, a token id outside the vocabulary,
// negative max_new_tokens or max_batch_cells, a cell list that mixes reuse cells with others, reuse
// cells without reuse_questions (or reuse_questions without reuse cells), a reuse question with an
// empty suffix, a decoding setting without a method or with an invalid policy (naming the cell),
// and EngineCapacityError when the unit cannot run on
// the engine (nothing about the unit can be recorded then); per-cell problems become failed cells.
UnitResult run_unit(InferenceEngine& engine, const model::ModelWeights& weights,
                    const UnitTokens& tokens, std::span<const CellSpec> cells,
                    const UnitRunOptions& options);

// A method's extra pass (methods/extra_pass.h) at `boundary`, as run_unit runs it: each of
// pass.chunks(prompt[0..boundary), pass_prompt) on its own copy of `prefilled` truncated to the
// boundary (`prefilled` itself is not changed), every layer folded by pass.observe with `layers`
// (the capture's views at the boundary). Throws what the engine or the pass throws.
methods::ExtraPassResult run_extra_pass(InferenceEngine& engine, const methods::ExtraPass& pass,
                                        const SequenceCache& prefilled, int boundary,
                                        std::span<const methods::LayerCapture> layers,
                                        std::span<const std::int32_t> prompt,
                                        const methods::PassPrompt& pass_prompt);

// The naive reference route (same inputs, same outputs; timings of its own work).
UnitResult run_unit_naive(InferenceEngine& engine, const model::ModelWeights& weights,
                          const UnitTokens& tokens, std::span<const CellSpec> cells,
                          const UnitRunOptions& options);

}  // namespace kvaudit::unit
