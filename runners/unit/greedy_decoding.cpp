// Greedy decoding (single and batched) over an InferenceEngine; see greedy_decoding.h.
#include "runners/unit/greedy_decoding.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "base/argmax.h"
#include "runners/unit/cost_shares.h"

namespace kvaudit::unit {
namespace {

bool is_eos(std::int32_t token, const GreedyOptions& options) {
  return std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) !=
         options.eos_token_ids.end();
}

// Appends `token`; returns true if the sequence is finished.
bool take_token(GreedyOutput& output, std::int32_t token, const GreedyOptions& options) {
  output.tokens.push_back(token);
  if (is_eos(token, options)) {
    output.stopped_on_eos = true;
    return true;
  }
  return static_cast<int>(output.tokens.size()) >= options.max_new_tokens;
}

}  // namespace

GreedyOutput generate_greedy(InferenceEngine& engine, SequenceCache& cache,
                             std::span<const float> last_logits, const GreedyOptions& options) {
  SequenceCache* const caches[] = {&cache};
  LogitMatrix logits;
  logits.rows = 1;
  logits.vocab = static_cast<int>(last_logits.size());
  logits.values.assign(last_logits.begin(), last_logits.end());
  return std::move(generate_greedy_batch(engine, caches, logits, options).front());
}

std::vector<GreedyOutput> generate_greedy_batch(InferenceEngine& engine,
                                                std::span<SequenceCache* const> caches,
                                                const LogitMatrix& last_logits,
                                                const GreedyOptions& options) {
  if (options.max_new_tokens < 0) {
    throw std::invalid_argument("greedy generation: max_new_tokens must be >= 0, got " +
                                std::to_string(options.max_new_tokens));
  }
  const int vocab = engine.config().vocab_size;
  if (last_logits.rows != static_cast<int>(caches.size()) || last_logits.vocab != vocab ||
      last_logits.values.size() != static_cast<std::size_t>(last_logits.rows) *
                                       static_cast<std::size_t>(last_logits.vocab)) {
    throw std::invalid_argument("greedy generation: last_logits is [" +
                                std::to_string(last_logits.rows) + ", " +
                                std::to_string(last_logits.vocab) + "], expected [" +
                                std::to_string(caches.size()) + ", " + std::to_string(vocab) + "]");
  }
  std::vector<GreedyOutput> outputs(caches.size());
  if (options.max_new_tokens == 0) return outputs;

  // active[k] = index of the k-th unfinished sequence; next_tokens[k] its token to decode.
  std::vector<std::size_t> active;
  std::vector<std::int32_t> next_tokens;
  for (std::size_t i = 0; i < caches.size(); ++i) {
    const std::int32_t token = argmax_token(last_logits.row(static_cast<int>(i)));
    if (!take_token(outputs[i], token, options)) {
      active.push_back(i);
      next_tokens.push_back(token);
    }
  }
  std::vector<double> step_shares(caches.size(), 0.0);
  while (!active.empty()) {
    const auto step_start = std::chrono::steady_clock::now();
    std::vector<SequenceCache*> batch;
    batch.reserve(active.size());
    for (std::size_t i : active) batch.push_back(caches[i]);
    const LogitMatrix logits = engine.decode_step(batch, next_tokens);
    std::vector<std::size_t> still_active;
    std::vector<std::int32_t> still_next;
    for (std::size_t k = 0; k < active.size(); ++k) {
      const std::size_t i = active[k];
      const std::int32_t token = argmax_token(logits.row(static_cast<int>(k)));
      if (!take_token(outputs[i], token, options)) {
        still_active.push_back(i);
        still_next.push_back(token);
      }
    }
    add_step_share(
        step_shares, active,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    active = std::move(still_active);
    next_tokens = std::move(still_next);
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) outputs[i].decode_step_seconds = step_shares[i];
  return outputs;
}

}  // namespace kvaudit::unit
