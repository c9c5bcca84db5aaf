// PyramidKvMethod (pyramidkv.h).
#include "methods/pyramidkv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/scorer_method.h"

namespace kvaudit::methods {

std::int64_t pyramid_layer_budget(std::int64_t length, double compression, int window, int beta,
                                  int layer, int num_layers) {
  if (beta < 1) throw std::invalid_argument("pyramidkv: beta must be >= 1");
  if (num_layers < 1 || layer < 0 || layer >= num_layers)
    throw std::invalid_argument("pyramidkv: layer " + std::to_string(layer) + " outside [0, " +
                                std::to_string(num_layers) + ")");
  const auto L = static_cast<double>(length);
  const auto w = static_cast<double>(window);
  const double cap = w + L * (1.0 - compression);
  double min_num = (cap - w) / beta;
  double max_num = (cap - w) * 2 - min_num;
  if (max_num >= L - w) {
    max_num = L - w;
    min_num = (cap - w) * 2 - max_num;
  }
  std::int64_t n;
  if (!(L >= max_num && max_num >= min_num && min_num >= w)) {
    n = std::max<std::int64_t>(1,
                               static_cast<std::int64_t>(std::nearbyint(L * (1.0 - compression))));
  } else {
    const double steps = num_layers > 1 ? (max_num - min_num) / (num_layers - 1) : 0.0;
    n = static_cast<std::int64_t>(std::nearbyint(max_num - layer * steps));
  }
  return std::clamp<std::int64_t>(n, 1, length);
}

PyramidKvMethod::PyramidKvMethod(PyramidKvParams params)
    : params_(params),
      scorer_(SnapKvParams{.variant = SnapKvVariant::kvpress,
                           .window = params.window,
                           .kernel_size = params.kernel_size,
                           .pooling = Pooling::avg}) {
  if (params.beta < 1) throw std::invalid_argument("pyramidkv: beta must be >= 1");
}

Selection PyramidKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                  const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  kept_count(L, budget.compression);  // validates the ratio
  Selection selection;
  for (const auto& layer : layers) {
    const auto n_kept = pyramid_layer_budget(L, budget.compression, params_.window, params_.beta,
                                             layer.layer, layer.num_layers);
    const auto scores = score_layer(scorer_, layer, budget, context);
    selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, L, n_kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
