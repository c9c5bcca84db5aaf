// PerLayerCompressionMethod (per_layer_compression.h).
#include "methods/per_layer_compression.h"

#include <stdexcept>
#include <string>

#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/wrapper_budgets.h"

namespace kvaudit::methods {

PerLayerCompressionMethod::PerLayerCompressionMethod(std::shared_ptr<const Scorer> scorer,
                                                     std::vector<double> compression_ratios)
    : ScorerWrapperMethod("per_layer_compression", std::move(scorer)),
      compression_ratios_(std::move(compression_ratios)) {
  if (!scorer_) throw std::invalid_argument("per_layer_compression: null scorer");
  if (compression_ratios_.empty())
    throw std::invalid_argument("per_layer_compression: compression_ratios is empty");
  for (const double r : compression_ratios_)
    if (!(r >= 0.0 && r < 1.0))
      throw std::invalid_argument(
          "per_layer_compression: every compression ratio must be in [0, 1)");
}

Selection PerLayerCompressionMethod::select(std::span<const LayerCapture> layers,
                                            const Budget& budget,
                                            const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  if (compression_ratios_.size() != layers.size())
    throw std::invalid_argument(name() + ": compression_ratios has " +
                                std::to_string(compression_ratios_.size()) +
                                " entries but the model has " + std::to_string(layers.size()) +
                                " layers (one ratio per layer)");
  check_fixed_compression(name(), mean_compression(compression_ratios_), budget.compression);
  Selection selection;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const Budget layer_budget{.compression = compression_ratios_[l], .threshold = budget.threshold};
    const auto scores = score_layer(*scorer_, layers[l], layer_budget, context);
    selection.kept.push_back(
        per_head_top_k(scores, layers[l].num_kv_heads, L, kept_count(L, compression_ratios_[l])));
  }
  return selection;
}

}  // namespace kvaudit::methods
