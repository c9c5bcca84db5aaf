// Greedy generation over any inference engine, as kvpress's pipeline and HF
// `generate(do_sample=False)` do it (docs/design/protocols.md §Decoding):
//   token_1 = argmax(logits of the last prefilled position)
//   repeat: append the token; stop if it is a stop id (the stop token IS part of the output, as in
//   HF generate) or max_new_tokens tokens were produced; else decode it and take the next argmax.
// The last produced token is not fed through the model (its K/V are not in the cache), as in HF.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/logit_matrix.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::unit {

struct GreedyOptions {
  int max_new_tokens = 0;                   // ≥ 0; 0 produces nothing
  std::vector<std::int32_t> eos_token_ids;  // any of them stops a sequence (may be empty)
};

struct GreedyOutput {
  std::vector<std::int32_t> tokens;  // generated ids, including a final stop id if one was produced
  bool stopped_on_eos = false;       // false: stopped at max_new_tokens
  // Its share of the decode steps' wall time: each decode_step (with the argmax of its logits) in
  // equal shares over the sequences decoded in that step (cost_shares.h).
  double decode_step_seconds = 0.0;
};

// Greedy continuation of one prefilled sequence; `last_logits` [vocab] are the logits of its last
// prefilled position (prefill(..., LogitRows::last).row(0)).
GreedyOutput generate_greedy(InferenceEngine& engine, SequenceCache& cache,
                             std::span<const float> last_logits, const GreedyOptions& options);

// Batched greedy: sequence i starts from last_logits.row(i) (last_logits is [batch, vocab]); all
// unfinished sequences decode together (one decode_step per token), each stops on its own.
// Output i is identical to generate_greedy on sequence i alone on the CPU engine (its GEMMs are
// row-invariant: runners/cpu/linear.cpp); the CUDA engine has not been checked for it.
// Throws std::invalid_argument for max_new_tokens < 0 or logits of another shape.
std::vector<GreedyOutput> generate_greedy_batch(InferenceEngine& engine,
                                                std::span<SequenceCache* const> caches,
                                                const LogitMatrix& last_logits,
                                                const GreedyOptions& options);

}  // namespace kvaudit::unit
