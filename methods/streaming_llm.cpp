// StreamingLlmScorer (streaming_llm.h).
#include "methods/streaming_llm.h"

#include <cstddef>
#include <stdexcept>

namespace kvaudit::methods {
namespace {

void check_length(const LayerCapture& layer, int n_sink) {
  if (layer.length <= n_sink)
    throw std::invalid_argument("streaming_llm: layer " + std::to_string(layer.layer) +
                                ": length " + std::to_string(layer.length) +
                                " must exceed n_sink " + std::to_string(n_sink) +
                                " (kvpress asserts k_len > n_sink)");
}

}  // namespace

StreamingLlmScorer::StreamingLlmScorer(int n_sink) : n_sink_(n_sink) {
  if (n_sink < 0) throw std::invalid_argument("streaming_llm: n_sink must be >= 0");
}

void StreamingLlmScorer::score(const LayerCapture& layer, const SelectionContext&,
                               std::span<float> scores) const {
  check_length(layer, n_sink_);
  const auto L = static_cast<std::size_t>(layer.length);
  for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h)
    for (std::size_t j = 0; j < L; ++j)
      scores[h * L + j] = j < static_cast<std::size_t>(n_sink_)
                              ? 1.0f + 1.0f / static_cast<float>(L)
                              : static_cast<float>(j + 1) / static_cast<float>(L);
}

void StreamingLlmScorer::score_for_budget(const LayerCapture& layer, const Budget& budget,
                                          const SelectionContext&, std::span<float> scores) const {
  check_length(layer, n_sink_);
  const std::int64_t L = layer.length;
  const std::int64_t n_pruned = L - kept_count(L, budget.compression);
  for (std::int64_t h = 0; h < layer.num_kv_heads; ++h)
    for (std::int64_t j = 0; j < L; ++j)
      scores[static_cast<std::size_t>(h * L + j)] =
          (j >= n_sink_ && j < n_sink_ + n_pruned) ? 0.0f : 1.0f;
}

}  // namespace kvaudit::methods
