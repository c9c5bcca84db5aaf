// SqueezeAttentionMethod (squeezeattention.h).
#include "methods/squeezeattention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "methods/capture_checks.h"
#include "methods/layer_budgets.h"
#include "methods/scorer_method.h"

namespace kvaudit::methods {

double squeeze_layer_importance(const LayerCapture& layer) {
  check_capture_basics(layer, "squeezeattention");
  if (layer.attention_cosine.size() != static_cast<std::size_t>(layer.length)) {
    throw std::invalid_argument(
        "squeezeattention: layer " + std::to_string(layer.layer) + " has " +
        std::to_string(layer.attention_cosine.size()) + " attention cosines for length " +
        std::to_string(layer.length) +
        " (was attention_cosine captured? the CPU capture records it; the CUDA capture not yet)");
  }
  double sum = 0.0;
  for (const float c : layer.attention_cosine) sum += static_cast<double>(c);
  return sum / static_cast<double>(layer.length);
}

std::vector<int> squeeze_groups(std::span<const double> importance) {
  const std::size_t n = importance.size();
  std::vector<int> groups(n, 0);
  if (n < 3) return groups;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return importance[a] < importance[b]; });
  // Prefix sums of the sorted values and their squares: SSE of run [a, b) in O(1).
  std::vector<double> sum(n + 1, 0.0), squares(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    const double v = importance[order[k]];
    sum[k + 1] = sum[k] + v;
    squares[k + 1] = squares[k] + v * v;
  }
  const auto sse = [&](std::size_t a, std::size_t b) {
    const double s = sum[b] - sum[a];
    return (squares[b] - squares[a]) - s * s / static_cast<double>(b - a);
  };
  double best = std::numeric_limits<double>::infinity();
  std::size_t best_i = 1, best_j = 2;
  for (std::size_t i = 1; i + 1 < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const double cost = sse(0, i) + sse(i, j) + sse(j, n);
      if (cost < best) {
        best = cost;
        best_i = i;
        best_j = j;
      }
    }
  }
  for (std::size_t k = 0; k < n; ++k) groups[order[k]] = k < best_i ? 0 : (k < best_j ? 1 : 2);
  return groups;
}

std::vector<std::int64_t> squeeze_layer_budgets(std::span<const int> groups, std::int64_t n_kept,
                                                double class3_share, std::int64_t length) {
  const auto n_layers = static_cast<std::int64_t>(groups.size());
  if (n_layers == 0) throw std::invalid_argument("squeezeattention: no layer");
  if (n_kept < 1 || n_kept > length)
    throw std::invalid_argument("squeezeattention: n_kept outside [1, L]");
  if (!(class3_share >= 0.0 && class3_share <= 1.0))
    throw std::invalid_argument("squeezeattention: class3_share must lie in [0, 1]");
  const std::int64_t group3_size = std::count(groups.begin(), groups.end(), 2);
  std::vector<std::int64_t> budgets(groups.size(), n_kept);
  if (group3_size == 0 || group3_size == n_layers) return budgets;
  const std::int64_t n3 = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(class3_share * static_cast<double>(n_kept))));
  const std::int64_t total = n_layers * n_kept;
  const std::int64_t rest = total - group3_size * n3;
  const std::int64_t others = n_layers - group3_size;
  std::int64_t handed = 0;
  for (std::size_t l = 0; l < groups.size(); ++l) {
    if (groups[l] == 2) {
      budgets[l] = n3;
    } else {
      budgets[l] = rest / others + (handed < rest % others ? 1 : 0);
      ++handed;
    }
  }
  return fit_layer_budgets(std::move(budgets), total, 1, length);
}

SqueezeAttentionMethod::SqueezeAttentionMethod(std::shared_ptr<const Scorer> scorer,
                                               double class3_share)
    : ScorerWrapperMethod("squeezeattention", std::move(scorer)), class3_share_(class3_share) {
  if (!scorer_) throw std::invalid_argument("squeezeattention: null scorer");
  if (!(class3_share_ >= 0.0 && class3_share_ <= 1.0))
    throw std::invalid_argument("squeezeattention: class3_share must lie in [0, 1]");
}

Selection SqueezeAttentionMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                         const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  std::vector<double> importance;
  for (const auto& layer : layers) importance.push_back(squeeze_layer_importance(layer));
  const auto groups = squeeze_groups(importance);
  const auto budgets = squeeze_layer_budgets(groups, n_kept, class3_share_, L);
  Selection selection;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const Budget layer_budget = budget_for_kept(L, budgets[l]);
    const auto scores = score_layer(*scorer_, layers[l], layer_budget, context);
    selection.kept.push_back(per_head_top_k(scores, layers[l].num_kv_heads, L, budgets[l]));
  }
  return selection;
}

}  // namespace kvaudit::methods
