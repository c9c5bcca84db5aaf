// HeadKvMethod (headkv.h).
#include "methods/headkv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

SnapKvParams window_scorer_params(const HeadKvParams& p) {
  return SnapKvParams{.variant = SnapKvVariant::kvpress,
                      .window = p.window,
                      .kernel_size = p.kernel_size,
                      .pooling = p.pooling};
}

void check_headkv_params(const HeadKvParams& p) {
  if (!(p.beta >= 1.0) || !std::isfinite(p.beta))
    throw std::invalid_argument("headkv: beta must be finite and >= 1");
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature))
    throw std::invalid_argument("headkv: temperature must be finite and >= 0");
}

// The first k indices of torch.sort(scores, descending=True) on the CPU (stable=False): ATen's
// sort kernel runs std::sort over (value, index) pairs in index order with the comparator
// "a is NaN and b is not, or a > b"; libstdc++'s introsort (shared with our build) then fixes the
// order of ties. Returned ascending.
std::vector<std::int32_t> torch_sort_first(std::span<const float> scores, std::int64_t k) {
  std::vector<std::pair<float, std::int32_t>> pairs;
  pairs.reserve(scores.size());
  for (std::size_t j = 0; j < scores.size(); ++j)
    pairs.emplace_back(scores[j], static_cast<std::int32_t>(j));
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    const bool a_nan = a.first != a.first;
    const bool b_nan = b.first != b.first;
    return (a_nan && !b_nan) || a.first > b.first;
  });
  const auto n = std::clamp<std::int64_t>(k, 0, static_cast<std::int64_t>(pairs.size()));
  std::vector<std::int32_t> kept;
  for (std::int64_t i = 0; i < n; ++i) kept.push_back(pairs[static_cast<std::size_t>(i)].second);
  std::sort(kept.begin(), kept.end());
  return kept;
}

HeadScores read_or_explain(const std::string& path) {
  try {
    return read_head_scores(path);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("headkv: head_scores file '" + path + "': " + e.what());
  }
}

}  // namespace

double python_floor_div(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0.0) != (mod < 0.0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

std::vector<std::int64_t> headkv_capacities(const HeadScores& scores, int num_kv_heads,
                                            std::int64_t beyond_window, double beta,
                                            double temperature) {
  if (num_kv_heads < 1 || scores.heads % num_kv_heads != 0)
    throw std::invalid_argument("headkv: the file's heads are not a multiple of the KV heads");
  const auto group = static_cast<std::size_t>(scores.heads / num_kv_heads);
  // p = normalise(normalise(s)^T), in double like the official float64 tensors.
  double total = 0.0;
  for (const double s : scores.score) total += s;
  std::vector<double> p(scores.score.size());
  double powered_total = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = std::pow(scores.score[i] / total, temperature);
    powered_total += p[i];
  }
  for (double& x : p) x /= powered_total;
  const double floor_share = python_floor_div(static_cast<double>(beyond_window), beta);
  const double minimum = static_cast<double>(beyond_window) - floor_share;
  const double pool = floor_share * scores.layers * num_kv_heads;
  std::vector<std::int64_t> caps;
  caps.reserve(static_cast<std::size_t>(scores.layers) * static_cast<std::size_t>(num_kv_heads));
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(scores.layers * num_kv_heads); ++kv) {
    double importance = 0.0;  // Σ of the group's p (the group's mean budget, before rounding)
    for (std::size_t m = 0; m < group; ++m) importance += p[kv * group + m];
    caps.push_back(static_cast<std::int64_t>(std::nearbyint(importance * pool + minimum)));
  }
  return caps;
}

HeadKvMethod::HeadKvMethod(HeadKvParams params)
    : params_(std::move(params)),
      scores_(read_or_explain(params_.head_scores)),
      scorer_(window_scorer_params(params_)) {
  check_headkv_params(params_);
}

HeadKvMethod::HeadKvMethod(HeadKvParams params, HeadScores scores)
    : params_(std::move(params)),
      scores_(std::move(scores)),
      scorer_(window_scorer_params(params_)) {
  check_headkv_params(params_);
}

Selection HeadKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                               const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const LayerCapture& first = layers.front();
  if (scores_.layers != static_cast<int>(layers.size()) || scores_.heads != first.num_heads) {
    throw std::invalid_argument("headkv: head_scores file '" + params_.head_scores + "' has " +
                                std::to_string(scores_.layers) + " layers × " +
                                std::to_string(scores_.heads) + " heads; the model has " +
                                std::to_string(layers.size()) + " layers × " +
                                std::to_string(first.num_heads) + " query heads");
  }
  const int w = params_.window;
  const std::int64_t n = kept_count(L, budget.compression);
  const std::int64_t beyond_window = n - w;
  const auto Hkv = static_cast<std::size_t>(first.num_kv_heads);
  const auto length = static_cast<std::size_t>(L);
  Selection out;
  out.kept.resize(layers.size());
  if (beyond_window <= 0) {  // n ≤ w: the last n positions
    for (const LayerCapture& layer : layers) check_window(layer, w, name());
    std::vector<std::int32_t> recent;
    for (std::int64_t j = L - n; j < L; ++j) recent.push_back(static_cast<std::int32_t>(j));
    for (auto& per_layer : out.kept) per_layer.assign(Hkv, recent);
    return out;
  }
  const std::vector<std::int64_t> caps = headkv_capacities(
      scores_, first.num_kv_heads, beyond_window, params_.beta, params_.temperature);
  const std::size_t prefix = length - static_cast<std::size_t>(w);
  std::vector<float> scores(Hkv * length);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    scorer_.score(layers[l], context, scores);  // checks the window
    out.kept[l].resize(Hkv);
    for (std::size_t kv = 0; kv < Hkv; ++kv) {
      const std::span<const float> head_prefix(scores.data() + kv * length, prefix);
      std::vector<std::int32_t> kept = torch_sort_first(head_prefix, caps[l * Hkv + kv]);
      for (std::size_t j = prefix; j < length; ++j) kept.push_back(static_cast<std::int32_t>(j));
      out.kept[l][kv] = std::move(kept);
    }
  }
  return out;
}

}  // namespace kvaudit::methods
