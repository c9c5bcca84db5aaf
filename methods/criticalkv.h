// CriticalKvScorer / CriticalKvMethod: two-stage selection with output-projected value norms (Feng
// et al. 2025, "Identify Critical KV Cache in LLM Inference from an Output Perturbation
// Perspective", arXiv 2502.03805; kvpress 0.5.5 CriticalKVPress, docs/design/kvpress.md
// §CriticalKVPress):
//   s = the wrapped scorer's scores (for this budget);
//   stage 1: the top b1 = floor((1−cr)·L·first_stage_ratio) of each KV head by s (at least 1 when
//            first_stage_ratio > 0, kvpress 0.5.5) are forced to float max;
//   stage 2: every other entry becomes (s + ε)·n(j), n(j) = mean over the GQA group of
//            ‖v_j W_o^{(h)}‖₁ with W_o^{(h)}[c, o] = o_proj[o, h·d + c] (LayerCapture::o_proj);
//   then ScorerPress top-k: each KV head keeps its kept_count(L, cr) best.
// The norms are computed in double and rounded to f32.
#pragma once

#include <memory>

#include "methods/method.h"

namespace kvaudit::methods {

// n_k(j) [Hkv, L] of stage 2.
std::vector<float> projected_value_l1_norms(const LayerCapture& layer);

class CriticalKvScorer : public Scorer {
 public:
  CriticalKvScorer(std::shared_ptr<const Scorer> scorer, double first_stage_ratio, double epsilon);
  // Without a budget the two stages are undefined: throws std::logic_error (use score_for_budget).
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  void score_for_budget(const LayerCapture& layer, const Budget& budget,
                        const SelectionContext& context, std::span<float> scores) const override;
  int window_needed() const override { return scorer_->window_needed(); }
  bool needs_column_sums() const override { return scorer_->needs_column_sums(); }
  bool needs_query_moments() const override { return scorer_->needs_query_moments(); }
  bool needs_all_queries() const override { return scorer_->needs_all_queries(); }
  bool needs_attention_input() const override { return scorer_->needs_attention_input(); }
  bool scores_depend_on_budget() const override { return true; }
  std::string name() const override { return "criticalkv(" + scorer_->name() + ")"; }

 private:
  std::shared_ptr<const Scorer> scorer_;
  double first_stage_ratio_;
  double epsilon_;
};

}  // namespace kvaudit::methods
