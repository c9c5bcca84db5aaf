// CompactorScorer (compactor.h).
#include "methods/compactor.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "base/size_cast.h"
#include "methods/non_causal_attention.h"
#include "methods/scorer_method.h"

namespace kvaudit::methods {
CompactorScorer::CompactorScorer(CompactorParams params, SketchSource injected_sketch)
    : params_(params), injected_sketch_(std::move(injected_sketch)) {
  if (params_.sink_size_start < 0 || params_.sink_size_end < 0)
    throw std::invalid_argument("compactor: sink sizes must be >= 0");
  if (params_.chunk_size < 1) throw std::invalid_argument("compactor: chunk_size must be >= 1");
  if (params_.sketch_dimension < 1)
    throw std::invalid_argument("compactor: sketch_dimension must be >= 1");
  if (!(params_.blending >= 0.0)) throw std::invalid_argument("compactor: blending must be >= 0");
}

void CompactorScorer::score(const LayerCapture& layer, const SelectionContext& context,
                            std::span<float> scores) const {
  score_for_budget(layer, Budget{}, context, scores);
}

void CompactorScorer::score_for_budget(const LayerCapture& layer, const Budget& budget,
                                       const SelectionContext& context,
                                       std::span<float> scores) const {
  check_all_queries(layer, name());
  const int L = layer.length;
  const int left = std::min(params_.sink_size_start, L);
  const int right = std::min(params_.sink_size_end, std::max(0, L - left));
  const int middle = L - left - right;
  const std::size_t n = to_size(L);
  if (middle == 0) {
    std::fill(scores.begin(), scores.end(), 0.0f);
    return;
  }
  const std::vector<float> sketch = injected_sketch_
                                        ? injected_sketch_(layer)
                                        : draw_sketch(layer, params_.sketch_dimension, context);
  std::vector<float> leverage =
      leverage_scores(layer, left, middle, sketch, params_.sketch_dimension);
  z_normalize(leverage);
  std::vector<float> attention =
      non_causal_attention_scores(layer, left, middle, params_.chunk_size);
  z_normalize(attention);
  // kvpress: a Python float times an f32 tensor, plus an f32 tensor.
  const auto blending = static_cast<float>(
      params_.variant == CompactorVariant::kvpress ? budget.compression : params_.blending);
  float top = -std::numeric_limits<float>::infinity();
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    for (std::size_t j = 0; j < to_size(middle); ++j) {
      const std::size_t at = h * to_size(middle) + j;
      const float s = blending * leverage[at] + attention[at];
      scores[h * n + to_size(left) + j] = s;
      top = std::max(top, s);
    }
  }
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    for (std::size_t j = 0; j < to_size(left); ++j) scores[h * n + j] = top;
    for (std::size_t j = n - to_size(right); j < n; ++j) scores[h * n + j] = top;
  }
}

std::unique_ptr<Method> make_method_with_sketch(const MethodParams& params, SketchSource sketch) {
  std::unique_ptr<Method> method;
  if (const auto* leverage = std::get_if<LeverageParams>(&params)) {
    method = std::make_unique<ScorerMethod>(
        std::make_shared<LeverageScorer>(*leverage, std::move(sketch)));
  } else if (const auto* compactor = std::get_if<CompactorParams>(&params)) {
    method = std::make_unique<ScorerMethod>(
        std::make_shared<CompactorScorer>(*compactor, std::move(sketch)));
  } else {
    throw std::invalid_argument("make_method_with_sketch: not a leverage or compactor method");
  }
  method->set_parameters(params);
  return method;
}

}  // namespace kvaudit::methods
