// SimLayerKvMethod: per-layer "lazy layer" test; a lazy layer keeps only its initial and most
// recent tokens, every other layer keeps everything.
//   Budget: the lazy threshold τ = Budget::threshold (BudgetAxis::threshold; kvpress's
//   lazy_threshold). Larger τ → fewer lazy layers → MORE retained (the opposite direction of
//   refreekv's T).
//   With A the window attention of the last w = n_last queries over all L keys
//   (methods/window_attention.h: causal inside the window, fp32 softmax, cast to the model dtype),
//   of which kvpress keeps the columns before the window (j < L − w):
//     a(j) = mean over query heads h and window rows r of A_h(r, j),  j < L − w
//     λ = Σ_{j < n_initial} a(j) + Σ_{L − w − n_recent ≤ j < L − w} a(j)
//     the layer is lazy iff λ > τ.
//   (So the "recent" tokens of the test are the n_recent before the window, not the last n_recent.)
//   A lazy layer keeps, in every KV head, positions 0..n_initial−1 and the last n_recent − n_last
//   positions (kvpress slices keys[-n_recent + n_last:]); a busy layer keeps all L.
//   Nothing is evicted when τ ≥ 1 (kvpress: τ = 1.0 switches the press off; λ ≤ 1 always) or
//   L ≤ n_initial + n_recent + n_last (kvpress: "no compression applied").
// Citation: Zhang et al. 2025, "SimLayerKV: A Simple Framework for Layer-Level KV Cache
// Reduction", arXiv 2410.13846; kvpress 0.5.5 kvpress/presses/simlayerkv_press.py
// SimLayerKVPress.
// Deviations: kvpress asserts τ ∈ [0, 1]; we accept any τ > 0 (the manifest's threshold lists are
// shared by a grid's threshold methods) and τ > 1 evicts nothing, as τ = 1 does. kvpress with
// n_recent ≤ n_last slices a tail that is not the last n_recent − n_last tokens (n_recent = n_last
// keeps every token plus the initial ones twice); we require n_recent > n_last
// (std::invalid_argument from the constructor). The realised retention is an outcome: mean over
// layers of kept / L. Precision (bf16 mode): a(j) is rounded to bf16 (torch's mean of a bf16
// tensor), each of the two sums and λ too, as kvpress's `.sum()` and `+` on bf16 tensors do.
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// One layer's test.
struct SimLayerKvLayerTest {
  bool compressible = false;  // L > n_initial + n_recent + n_last and τ < 1
  double lazy_score = 0.0;    // λ (0 when not compressible: not computed)
  bool lazy = false;
};

class SimLayerKvMethod : public Method {
 public:
  explicit SimLayerKvMethod(const SimLayerKvParams& params);
  // Uses budget.threshold (τ); budget.compression is ignored (the method has no ratio).
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  SimLayerKvLayerTest test_layer(const LayerCapture& layer, double threshold) const;
  int window_needed() const override { return params_.n_last; }
  std::string name() const override { return "simlayerkv"; }

 private:
  SimLayerKvParams params_;
};

}  // namespace kvaudit::methods
