// PerLayerCompressionMethod: a scorer's ScorerPress selection with one compression ratio per layer
// (kvpress 0.5.5 kvpress/presses/per_layer_compression_press.py PerLayerCompressionPress):
//   layer ℓ keeps, per KV head, the n_ℓ = max(1, floor(L·(1−r_ℓ))) best scores of the wrapped
//   scorer (scored for the budget r_ℓ; ties as torch.topk, top_k.h); r_ℓ = 0 keeps the layer whole.
// Budget: kvpress's press reports compression_ratio = mean_ℓ r_ℓ (Python sum/len) and refuses to
// have it set, so the ratio list IS the budget. A cell must ask for exactly that mean (within
// 1e−9; the manifest refuses other grid ratios at plan time, MethodSpec::fixed_compression, and
// select() throws otherwise: methods/wrapper_budgets.h); the list must have one ratio per layer
// of the model (kvpress indexes it by layer_idx), also checked here.
#pragma once

#include <memory>
#include <vector>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class PerLayerCompressionMethod : public ScorerWrapperMethod {
 public:
  PerLayerCompressionMethod(std::shared_ptr<const Scorer> scorer,
                            std::vector<double> compression_ratios);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  std::vector<double> compression_ratios_;
};

}  // namespace kvaudit::methods
