// CompactorScorer: leverage blended with non-causal attention, sinks protected (Chari & Van
// Durme 2025, "Compactor: Calibrated Query-Agnostic KV Cache Compression with Approximate
// Leverage Scores", arXiv 2507.08143; kvpress 0.5.5 kvpress/presses/compactor_press.py
// CompactorPress). Per layer, with n0 = min(sink_size_start, L), n1 = min(sink_size_end,
// max(0, L − n0)) and the middle slice M = positions n0..L−n1−1:
//   s(j) = β · z_lev(j) + z_att(j)          for j in M
//   s(j) = max over the layer's s (all KV heads)   for the n0 first and n1 last positions
// z_lev = LeverageScorer's z-normalised leverage of the slice (centring, sketch and z-score over
// M only; methods/leverage.h), z_att = NonCausalAttentionScorer's z-normalised score of the slice
// (chunks start at n0; the queries keep their original RoPE positions;
// methods/non_causal_attention.h). β = blending: the cell's compression ratio under the kvpress
// variant (CompactorPress's default blending=None), the `blending` parameter under
// fixed_blending. The sinks get the max itself, not max + 1 (as kvpress 0.5.5): the best middle
// token ties with them.
// Deviation: with an empty slice (L ≤ n0 + n1) kvpress fails (the max of an empty tensor); we
// score every position 0, so the kept positions follow the top-k tie order.
// Paper deviations kvpress made and we follow: the blending heuristic β = cr and the Cholesky
// (ridge) leverage instead of the paper's.
#pragma once

#include <memory>
#include <string>

#include "methods/leverage.h"
#include "methods/method.h"

namespace kvaudit::methods {

class CompactorScorer : public Scorer {
 public:
  explicit CompactorScorer(CompactorParams params, SketchSource injected_sketch = {});
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  void score_for_budget(const LayerCapture& layer, const Budget& budget,
                        const SelectionContext& context, std::span<float> scores) const override;
  bool scores_depend_on_budget() const override {
    return params_.variant == CompactorVariant::kvpress;
  }
  bool scores_depend_on_cell() const override { return !injected_sketch_; }
  bool needs_all_queries() const override { return true; }
  std::string name() const override { return "compactor"; }

 private:
  CompactorParams params_;
  SketchSource injected_sketch_;
};

// Test-only: the method of `params` (LeverageParams or CompactorParams, as make_method builds it)
// whose sketches come from `sketch` instead of the Philox stream — how the parity test hands our
// scorer the sketches kvpress drew. Throws std::invalid_argument for other parameters.
std::unique_ptr<Method> make_method_with_sketch(const MethodParams& params, SketchSource sketch);

}  // namespace kvaudit::methods
