// StreamingLlmScorer: keep the n_sink first tokens and the most recent ones (Xiao et al. 2024,
// "Efficient Streaming Language Models with Attention Sinks"; kvpress StreamingLLMPress, n_sink 4,
// docs/design/kvpress.md §StreamingLLMPress). kvpress variant: original RoPE positions are kept
// (no pos-shift).
// With the budget (score_for_budget) the scores are kvpress's exactly:
//   n_pruned = L − floor(L(1−cr));  s(j) = 0 for n_sink ≤ j < n_sink + n_pruned, else 1,
// so top-k keeps the sinks and the last n_kept − n_sink tokens. Without a budget (score()) the
// scores rank the same way for every budget: s(j) = L + 1 for sinks, j + 1 otherwise (normalised
// to (0, 1]).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class StreamingLlmScorer : public Scorer {
 public:
  explicit StreamingLlmScorer(int n_sink);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  void score_for_budget(const LayerCapture& layer, const Budget& budget,
                        const SelectionContext& context, std::span<float> scores) const override;
  bool scores_depend_on_budget() const override { return true; }
  std::string name() const override { return "streaming_llm"; }

 private:
  int n_sink_;
};

}  // namespace kvaudit::methods
