// Greedy generation on the CPU backend, as kvpress's pipeline and HF `generate(do_sample=False)` do
// it (reference/kvpress.md §4 "Decoding"):
//   token_1 = argmax(logits of the last prefilled position)
//   repeat: append the token; stop if it is an eos id (the eos token IS part of the output, as in
//   HF generate) or max_new_tokens tokens were produced; else decode it and take the next argmax.
// The last produced token is not fed through the model (its K/V are not in the cache), as in HF.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/cpu/logit_matrix.h"
#include "runners/cpu/sequence_state.h"

namespace kvaudit::cpu {

struct GreedyOptions {
  int max_new_tokens = 0;                   // ≥ 0; 0 produces nothing
  std::vector<std::int32_t> eos_token_ids;  // any of them stops a sequence (may be empty)
};

struct GreedyOutput {
  std::vector<std::int32_t> tokens;  // generated ids, including a final eos id if one was produced
  bool stopped_on_eos = false;       // false: stopped at max_new_tokens
};

// Index of the largest logit; ties go to the lowest id, and a NaN counts as the largest value
// (first NaN wins), like torch.argmax. Throws std::invalid_argument for an empty span.
std::int32_t argmax_token(std::span<const float> logits);

// Greedy continuation of one prefilled sequence; `last_logits` [vocab] are the logits of its last
// prefilled position (prefill(..., LogitRows::last).row(0)).
GreedyOutput generate_greedy(const CpuModel& model, SequenceState& state,
                             std::span<const float> last_logits, const GreedyOptions& options);

// Batched greedy: sequence i starts from last_logits.row(i) (last_logits is [batch, vocab]); all
// unfinished sequences decode together (one decode_step per token), each stops on its own.
// Output i is identical to generate_greedy on sequence i alone (up to GEMM row-batching rounding).
std::vector<GreedyOutput> generate_greedy_batch(const CpuModel& model,
                                                std::span<SequenceState* const> states,
                                                const LogitMatrix& last_logits,
                                                const GreedyOptions& options);

}  // namespace kvaudit::cpu
