// Decode-time compression: kvpress 0.5.5's DecodingPress (kvpress/presses/decoding_press.py) on
// kvaudit's engines — the cache of a generating sequence is cut back to `target_size` entries per
// (layer, KV head) every `compression_interval` decode steps by any scoring method, so a
// reasoning trace's cache stays bounded (docs/design/decoding.md).
//
// kvpress's rule, restated (hook after each attention module, decode steps only):
//   every decode step, per layer: append the step's attention input row to the layer's buffer and
//   count the step; when the count reaches compression_interval, compress the layer's CURRENT
//   cache (k_len = every entry it holds, the step's new token included) with the scorer at the
//   compression ratio of decoding_compression_ratio(k_len, target_size) — nothing is evicted when
//   k_len ≤ target_size — then reset the count and clear the buffer; otherwise keep only the last
//   hidden_states_buffer_size rows. So a compression sees min(steps since the last one,
//   hidden_states_buffer_size + 1) buffered rows.
//   The scorer's window queries are q_proj of the buffered rows, all rotated at the position of
//   the compressing step's token (kvpress SnapKVPress.compute_window_attention applies the step's
//   position_embeddings, which cover that one token, to every buffered row):
//   BufferedQueryPositions::current_step. R-KV's official code instead caches each step's query
//   rotated at its own position: BufferedQueryPositions::own.
//   The step's logits are computed before its compression (the hook runs after attention), and
//   positions keep counting from the original length (evicted tokens still advance it).
//   The hook's trigger is `step count ≥ compression_interval OR q_len ≥ target_size`; a decode
//   step feeds one token (q_len = 1), so a target of 1 compresses at every step.
// kvpress CompressionRatioDecodingPress (compression_ratio_decoding_press.py;
// DecodingPolicy::target_compression_ratio r): the same press with the target re-evaluated at
// every step as max(1, int(T·(1 − r))), T = total tokens seen = max(position_ids) + 1 = the
// step's token's original position + 1 (SequenceCache::original_length() after the step: evicted
// tokens count), not the cache's length: decoding_target_size.
// kvaudit builds, per layer, a LayerCapture over the cache's entries (candidates = the entries in
// ascending original position, length = their count, window rows = the rotated buffer) and calls
// the cell's method through Method::select one layer at a time (kvpress compresses each layer on
// its own), then SequenceCache::retain maps the chosen indices back to original positions.
// Difference from kvpress kept in mind: kvpress gathers the kept entries in top-k order (score
// order, not position order); scorers that read only per-entry quantities (KNorm, TOVA, R-KV's
// importance) do not see the order, SnapKV's pooling over neighbouring entries does, so kvaudit's
// DecodingPress(SnapKV) is SnapKV over the position-ordered cache.
//
// PrefillDecodingPress(prefilling_press, decoding_press) is the prefill eviction the unit runner
// already does (capture + select + retain) followed by generate_greedy_compressing.
//
// CAM (DecodingPolicy::merge_budget > 0; kvpress CAMPress, runners/unit/cam_merging.h): the same
// buffer and scorer, its own per-layer trigger, a selection shared by the KV heads (the mean
// score), and the values of some evicted entries merged into the kept ones that follow them;
// needs a plain scorer method (ScorerMethod) and SequenceCache::replace_values.
//
// DMS with decoding (CompressingSequence::dms; runners/unit/dms_decoding.h): the sequence's
// DmsDecoding replaces the interval/target rule — each step's new entry is scored and whatever
// left the sliding window below the threshold is evicted; an event is recorded for each step that
// evicted.
//
// Engines: needs InferenceEngine::decode_step_observed and SequenceCache::head_entries (the CPU
// engine; the CUDA engine refuses with a message naming --device cpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "methods/method.h"
#include "methods/scorer_method.h"
#include "runners/unit/cam_merging.h"
#include "runners/unit/dms_decoding.h"
#include "runners/unit/greedy_decoding.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::unit {

// Which RoPE position a buffered query row gets when it is scored.
enum class BufferedQueryPositions {
  current_step,  // kvpress DecodingPress: every row at the compressing step's position
  own,           // R-KV official: each row at the position of the token it was computed for
};

// kvpress DecodingPress's parameters (same names and defaults).
struct DecodingPolicy {
  int compression_interval = 512;       // decode steps between compressions, ≥ 1
  int target_size = 2048;               // entries per (layer, KV head) after a compression, ≥ 1
  int hidden_states_buffer_size = 256;  // rows kept between steps, ≥ 0
  BufferedQueryPositions query_positions = BufferedQueryPositions::current_step;
  // kvpress CAMPress's merge_budget (cam_merging.h): 0 = plain DecodingPress, > 0 = CAM.
  int merge_budget = 0;
  // kvpress CompressionRatioDecodingPress's target_compression_ratio r, 0 ≤ r < 1: when set, the
  // target of each step is max(1, int(T·(1 − r))) with T the tokens seen so far (the step's
  // token's original position + 1) and target_size is not used. Not with CAM (CAMPress has a
  // fixed target_size).
  std::optional<double> target_compression_ratio = std::nullopt;
};

// Throws std::invalid_argument naming the field for a value out of range.
void validate(const DecodingPolicy& policy);

// The step's target entries per (layer, KV head): policy.target_size, or with
// target_compression_ratio r, kvpress CompressionRatioDecodingPress._resolve_target_size:
// max(1, int(total_tokens_seen · (1 − r))) (the product in double, truncated like Python's int()).
std::int64_t decoding_target_size(const DecodingPolicy& policy, std::int64_t total_tokens_seen);

// kvpress DecodingPress._find_target_compression_ratio(k_len, target): 0 when k_len ≤ target,
// else the ratio r whose int(k_len·(1−r)) == target, found by kvpress's 20-step bisection started
// at 1 − target/k_len (in double, as Python floats are), so a method's kept_count(k_len, r) keeps
// what kvpress keeps even where the bisection does not land exactly.
double decoding_compression_ratio(std::int64_t k_len, std::int64_t target_size);

// CAM's base scores through a method that wraps the cell's method (the unit runner's per-cell
// guard): a scorer failure there fails that cell alone and the layer is then kept whole.
class CamScoreSource {
 public:
  virtual ~CamScoreSource() = default;
  // Whether the wrapped method is a methods::ScorerMethod (CAM's base press).
  virtual bool cam_capable() const = 0;
  // methods::score_layer of its scorer, or nothing after a failure.
  virtual std::optional<std::vector<float>> cam_scores(
      const methods::LayerCapture& layer, const methods::Budget& budget,
      const methods::SelectionContext& context) const = 0;
};

// One time the interval was reached.
struct CompressionEvent {
  int decode_step = 0;               // decode_step calls run so far (1-based: this step)
  std::int64_t original_length = 0;  // the cache's original_length() after the step
  std::int64_t target_size = 0;      // the step's target (decoding_target_size)
  bool evicted = false;              // some layer had k_len > target_size
  double seconds = 0.0;              // wall time of building the views, scoring and retain
  // kept[layer][kv_head]: original positions kept after it, ascending (only when recording).
  std::vector<std::vector<std::vector<std::int32_t>>> kept;
  int merges = 0;  // CAM: passed merge draws (Σ M over layers, KV heads and candidates)
  // CAM, only when recording: value_sums[layer][kv_head][i] = Σ of the value row of the i-th
  // entry the head holds after the event (merged values included).
  std::vector<std::vector<std::vector<double>>> value_sums;
  // DMS, only when recording: removed[layer][kv_head] = the original positions it evicted.
  std::vector<std::vector<std::vector<std::int32_t>>> removed;
};

// The decode-time compression state of one sequence: its per-layer buffer and step count.
class DecodingCompressor {
 public:
  // `method` scores one layer at a time (any Method whose select accepts a one-layer span: every
  // scorer, and the wrappers that do not need the whole model); it must outlive the compressor.
  // `context` is handed to select (its memo is ignored: the views change every time).
  // CAM (policy.merge_budget > 0) needs a methods::ScorerMethod or a CamScoreSource that is
  // cam_capable() (throws std::invalid_argument otherwise); `merge_draw` replaces its Philox draws
  // (tests; empty = Philox).
  // `dms` (optional, must outlive the compressor): DMS with decoding replaces the policy's rule.
  DecodingCompressor(const InferenceEngine& engine, const methods::Method& method,
                     DecodingPolicy policy, methods::SelectionContext context, bool record_kept,
                     MergeDrawRule merge_draw = {}, DmsDecoding* dms = nullptr);

  // Buffers row `row` of one layer's view of a decode step (every layer, once per step).
  void observe(const DecodeLayerView& view, int row);
  // Ends a decode step of `cache` (after every layer was observed): counts it and, when the
  // interval is reached, compresses `cache`. Returns the event, or nothing when not due.
  // Throws std::invalid_argument when a layer's heads hold different numbers of entries (one
  // LayerCapture needs one length) or the method refuses the view.
  std::optional<CompressionEvent> end_step(SequenceCache& cache);

  int decode_steps() const { return decode_steps_; }

 private:
  struct BufferedRow {
    std::vector<float> queries_pre_rope;  // [H, d]
    std::vector<float> cos, sin;          // [d] of the row's own position
  };
  CompressionEvent compress(SequenceCache& cache, std::int64_t target_size);
  std::optional<CompressionEvent> end_step_cam(SequenceCache& cache);
  std::vector<float> window_queries(int layer, int rows) const;  // [H, rows, d]
  // The scorer's one-layer view of `heads` with the last `rows` buffered rows as its window.
  methods::LayerCapture layer_view(int layer, const std::vector<CacheHeadEntries>& heads,
                                   std::vector<float>& queries) const;

  const InferenceEngine& engine_;
  const methods::Method& method_;
  DecodingPolicy policy_;
  methods::SelectionContext context_;
  bool record_kept_;
  std::vector<std::vector<BufferedRow>> buffer_;  // [layer] rows, oldest first
  std::vector<float> step_cos_, step_sin_;        // [d] of the current step's token
  int count_ = 0;                                 // steps since the last compression
  int decode_steps_ = 0;
  // CAM only:
  const methods::ScorerMethod* cam_scorer_ = nullptr;
  const CamScoreSource* cam_source_ = nullptr;
  MergeDrawRule merge_draw_;
  std::vector<std::vector<float>> attention_sums_;  // [layer] A, [Hkv, n]
  std::vector<int> layer_counts_;                   // [layer] steps since its last compression
  DmsDecoding* dms_ = nullptr;
};

// One sequence of generate_greedy_compressing: its cache, first logits and compression.
struct CompressingSequence {
  SequenceCache* cache = nullptr;
  std::span<const float> last_logits;  // [vocab] of the last prefilled position
  const methods::Method* method = nullptr;
  DecodingPolicy policy;
  methods::SelectionContext context;
  MergeDrawRule merge_draw = {};  // CAM's draws (tests); empty = Philox
  // DMS with decoding: the sequence's state after its feed (dms_decoding.h); `policy` is then
  // unused. nullptr: the policy's rule.
  DmsDecoding* dms = nullptr;
};

struct CompressingOutput {
  GreedyOutput greedy;
  std::vector<CompressionEvent> events;
  std::size_t peak_kept_bytes = 0;   // the cache's largest kept_bytes(), before any compression
  std::size_t final_kept_bytes = 0;  // after the last step
  int compressions = 0;              // events that evicted something
  double compression_seconds = 0.0;  // Σ events' seconds
};

// Greedy generation (greedy_decoding.h's rules) with decode-time compression per sequence; all
// unfinished sequences decode together through decode_step_observed. `record_kept` fills each
// event's kept sets. Output i matches the sequence decoded alone (the CPU engine's rows are
// independent). Throws std::invalid_argument for an invalid policy, a null cache or method, or
// logits of the wrong size.
std::vector<CompressingOutput> generate_greedy_compressing(
    InferenceEngine& engine, std::span<const CompressingSequence> sequences,
    const GreedyOptions& options, bool record_kept = false);

}  // namespace kvaudit::unit
