// LukvMethod (lukv.h).
#include "methods/lukv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "methods/artefact_files.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

int lukv_target_index(double compression) {
  // Python's round() on a float rounds half to even, as nearbyint does in the default mode.
  const double target = std::nearbyint(compression * 100.0) - 1.0;
  return static_cast<int>(std::clamp(target, 0.0, static_cast<double>(kLukvTargets - 1)));
}

float torch_cpu_sum(std::span<const float> x) {
  constexpr std::size_t kIlp = 4;
  constexpr std::size_t kLanes = 8;
  const std::size_t n = x.size();
  if (n < kLanes) {
    std::array<float, kIlp> partial{};
    const std::size_t rows = n / kIlp;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t k = 0; k < kIlp; ++k) partial[k] += x[i * kIlp + k];
    for (std::size_t e = rows * kIlp; e < n; ++e) partial[0] += x[e];
    for (std::size_t k = 1; k < kIlp; ++k) partial[0] += partial[k];
    return partial[0];
  }
  const std::size_t vectors = n / kLanes;
  const std::size_t rows = vectors / kIlp;
  std::array<std::array<float, kLanes>, kIlp> partial{};
  auto add_vector = [&](std::array<float, kLanes>& into, std::size_t v) {
    for (std::size_t l = 0; l < kLanes; ++l) into[l] += x[v * kLanes + l];
  };
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t k = 0; k < kIlp; ++k) add_vector(partial[k], i * kIlp + k);
  for (std::size_t v = rows * kIlp; v < vectors; ++v) add_vector(partial[0], v);
  for (std::size_t k = 1; k < kIlp; ++k)
    for (std::size_t l = 0; l < kLanes; ++l) partial[0][l] += partial[k][l];
  float total = 0.0f;
  for (std::size_t e = vectors * kLanes; e < n; ++e) total += x[e];
  for (std::size_t l = 0; l < kLanes; ++l) total += partial[0][l];
  return total;
}

std::vector<std::int64_t> lukv_keep_counts(std::span<const float> prune_ratios,
                                           std::int64_t length) {
  const auto heads = static_cast<std::int64_t>(prune_ratios.size());
  std::vector<float> ideal(prune_ratios.size());
  for (std::size_t h = 0; h < ideal.size(); ++h) {
    const float keep_rate = std::clamp(1.0f - prune_ratios[h], 0.0f, 1.0f);
    ideal[h] = keep_rate * static_cast<float>(length);
  }
  const float ideal_sum = torch_cpu_sum(ideal);
  const auto rounded = static_cast<std::int64_t>(std::nearbyint(ideal_sum));
  const std::int64_t total = std::max(heads, std::min(heads * length, rounded));
  std::vector<std::int64_t> keep(ideal.size());
  std::vector<float> fraction(ideal.size());
  std::int64_t base_sum = 0;
  for (std::size_t h = 0; h < ideal.size(); ++h) {
    keep[h] = static_cast<std::int64_t>(std::floor(ideal[h]));
    fraction[h] = ideal[h] - static_cast<float>(keep[h]);
    base_sum += keep[h];
  }
  const std::int64_t remainder = total - base_sum;
  if (remainder > 0)
    for (const std::int64_t h : torch_top_k_ranked(fraction, std::min(remainder, heads)))
      ++keep[static_cast<std::size_t>(h)];
  for (auto& k : keep) k = std::clamp<std::int64_t>(k, 1, length);
  return keep;
}

std::vector<std::int32_t> stable_top_positions(std::span<const float> scores, std::int64_t keep) {
  std::vector<std::int32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const float x = scores[static_cast<std::size_t>(a)];
    const float y = scores[static_cast<std::size_t>(b)];
    const bool x_nan = std::isnan(x);
    const bool y_nan = std::isnan(y);
    if (x_nan || y_nan) return x_nan && !y_nan;
    return x > y;
  });
  order.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(keep, 0, std::ssize(order))));
  std::sort(order.begin(), order.end());
  return order;
}

LukvMethod::LukvMethod(std::shared_ptr<const Scorer> scorer, NpyArray curve,
                       std::string curve_source, int sink, int window)
    : ScorerWrapperMethod("lukv", std::move(scorer)),
      curve_(std::move(curve)),
      curve_source_(std::move(curve_source)),
      sink_(sink),
      window_(window) {
  if (!scorer_) throw std::invalid_argument("lukv: null scorer");
  if (sink < 0) throw std::invalid_argument("lukv: sink must be >= 0");
  if (window < 0) throw std::invalid_argument("lukv: window must be >= 0");
  if (curve_.shape.size() != 3 || curve_.shape[0] != kLukvTargets || curve_.shape[1] < 1 ||
      curve_.shape[2] < 1)
    throw std::invalid_argument("lukv: " + curve_source_ + ": budget curve has shape " +
                                shape_text(curve_.shape) + " (want [99, layers, KV heads])");
}

Selection LukvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                             const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  if (!(budget.compression >= 0.0 && budget.compression < 1.0))
    throw std::invalid_argument(name() + ": compression must be in [0, 1)");
  const int heads = layers.front().num_kv_heads;
  if (curve_.shape[1] != std::ssize(layers) || curve_.shape[2] != heads)
    throw std::invalid_argument(name() + ": " + curve_source_ + ": budget curve " +
                                shape_text(curve_.shape) + " does not fit the model: want [99, " +
                                std::to_string(layers.size()) + ", " + std::to_string(heads) +
                                "] (layers, KV heads)");
  Selection selection;
  if (budget.compression <= 0.0) {  // kvpress returns before scoring: everything stays
    std::vector<std::int32_t> all(static_cast<std::size_t>(L));
    std::iota(all.begin(), all.end(), 0);
    for (std::size_t l = 0; l < layers.size(); ++l)
      selection.kept.emplace_back(static_cast<std::size_t>(heads), all);
    return selection;
  }
  const int target = lukv_target_index(budget.compression);
  const auto length = static_cast<std::size_t>(L);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerCapture& layer = layers[l];
    std::vector<float> scores = score_layer(*scorer_, layer, budget, context);
    // torch's max: NaN if any score is NaN.
    float max_score = -std::numeric_limits<float>::infinity();
    bool any_nan = false;
    for (const float s : scores) {
      any_nan = any_nan || std::isnan(s);
      if (s > max_score) max_score = s;
    }
    if (any_nan) max_score = std::numeric_limits<float>::quiet_NaN();
    const float protected_score =
        maybe_bf16(static_cast<float>(static_cast<double>(max_score) + 1.0), layer.model_is_bf16);
    const std::size_t sink_end = std::min<std::size_t>(static_cast<std::size_t>(sink_), length);
    const std::size_t window_begin =
        length - std::min<std::size_t>(static_cast<std::size_t>(window_), length);
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads); ++h) {
      float* head = scores.data() + h * length;
      for (std::size_t j = 0; j < sink_end; ++j) head[j] = protected_score;
      if (window_ > 0)
        for (std::size_t j = window_begin; j < length; ++j) head[j] = protected_score;
    }
    std::vector<float> prune_ratios(static_cast<std::size_t>(heads));
    const auto row =
        (static_cast<std::size_t>(target) * layers.size() + l) * static_cast<std::size_t>(heads);
    for (std::size_t h = 0; h < prune_ratios.size(); ++h)
      prune_ratios[h] = static_cast<float>(curve_.values[row + h]);
    const std::vector<std::int64_t> keep = lukv_keep_counts(prune_ratios, L);
    std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(heads));
    for (std::size_t h = 0; h < kept.size(); ++h)
      kept[h] =
          stable_top_positions(std::span<const float>(scores).subspan(h * length, length), keep[h]);
    selection.kept.push_back(std::move(kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
