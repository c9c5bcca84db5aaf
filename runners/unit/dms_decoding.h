// DMS with decoding: kvpress 0.5.5 DMSPress(decoding=True) (kvpress/presses/dms_press.py) after the
// prefill, on kvaudit's engines — the threshold rule of methods/dms.h goes on for every entry fed
// after the prefill eviction (the rest of the prompt, then each generated token).
//
// kvpress's hook, restated (every forward, every layer, after attention): the wrapped per-entry
// scorer scores only the forward's q new entries, s(h, ·) for each KV head h; they join the layer's
// window buffer of scores (the prefill left its last min(L, w) there); while the buffer holds more
// than w entries its oldest, at original position p, leaves it, and every head h with
// s(h, p) < T (T in the scores' dtype, methods/dms.h dms_threshold) stops attending p from the next
// forward on. So an entry is judged once, when w newer entries have arrived; heads keep different
// counts. kvpress masks with a fake key and never shortens the cache (a cache index is the original
// position there); kvaudit evicts the same (layer, head, position) after the forward, so each
// forward attends the same set.
//
// Here: DmsDecoding holds one sequence's window buffers. feed() prefills the rest through
// InferenceEngine::observed_prefill (the engine hands over each layer's new keys, values and
// attention input), scores, evicts and returns the last logits. During greedy decoding
// (decoding_compression.h generate_greedy_compressing, CompressingSequence::dms) observe() keeps
// each layer's attention-input row of the step and end_step() scores the step's new entry (its
// key and value are the last entry each head holds), evicts and reports a CompressionEvent when
// something went. The CPU engine has both hooks; other engines refuse (the cell fails).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/logit_matrix.h"
#include "methods/dms.h"
#include "methods/method.h"
#include "runners/model/model_config.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::unit {

struct CompressionEvent;  // decoding_compression.h

class DmsDecoding {
 public:
  // `method` must have decoding() and outlive this; `prefill` is its selection at the boundary
  // `boundary` (L; it carries window_scores for the last min(L, w) positions); `threshold` the
  // cell's T. Throws std::invalid_argument when the selection's window scores do not fit the
  // model or L.
  DmsDecoding(const model::ModelConfig& config, const methods::DmsMethod& method, double threshold,
              const methods::Selection& prefill, int boundary, methods::SelectionContext context,
              bool record_kept = false);

  // Prefills `tokens` on top of `cache` (holding the prefill's kept entries) with observation,
  // scores and pushes the new entries, evicts what left the window; returns the last row's logits
  // and, in `event`, what it evicted (decode_step 0). Throws std::invalid_argument when the
  // engine cannot observe a feed (its message) and when scoring fails.
  LogitMatrix feed(InferenceEngine& engine, SequenceCache& cache,
                   std::span<const std::int32_t> tokens, std::optional<CompressionEvent>& event);

  // A decode step's layer view, row `row` of it: keeps the row's attention input (every layer,
  // once per step).
  void observe(const DecodeLayerView& view, int row);
  // Ends the step: scores each layer's new entry, pushes it, evicts; the event when something was
  // evicted (or, when recording, always), else nothing. Throws std::invalid_argument when a layer
  // was not observed or the cache's last entries are not the step's.
  std::optional<CompressionEvent> end_step(SequenceCache& cache);

  int decode_steps() const { return decode_steps_; }

 private:
  struct Scored {
    std::int32_t position = 0;
    std::vector<float> scores;  // [Hkv]
  };
  // Scores one layer's `count` new entries (keys/values [count, d] per head, attention input
  // [count, D] or empty) and appends them to the layer's buffer.
  void push(int layer, std::span<const std::int32_t> positions,
            const std::vector<std::vector<float>>& keys,
            const std::vector<std::vector<float>>& values, std::span<const float> attention_input);
  // Pops what left every layer's window and evicts it from the heads below the threshold.
  CompressionEvent evict(SequenceCache& cache, int decode_step);

  const model::ModelConfig& config_;
  const methods::DmsMethod& method_;
  float threshold_;
  std::size_t window_;
  methods::SelectionContext context_;
  bool record_kept_;
  std::vector<std::deque<Scored>> buffer_;      // [layer] oldest first, ≤ window_ after evict
  std::vector<std::vector<float>> step_input_;  // [layer] the step's attention input row [D]
  std::vector<bool> observed_;                  // [layer] observed this step
  std::int32_t step_position_ = -1;             // the step's token's original position
  int decode_steps_ = 0;
};

}  // namespace kvaudit::unit
