// MergingMethod (merging.h).
#include "methods/merging.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

constexpr float kEpsilon = 1e-6f;  // kvpress's _EPS, applied to f32 tensors

float row_norm(const float* row, std::size_t d) {
  double sum = 0;
  for (std::size_t m = 0; m < d; ++m) sum += static_cast<double>(row[m]) * row[m];
  return static_cast<float>(std::sqrt(sum));
}

// k / max(‖k‖, 1e-6), elementwise in f32.
std::vector<float> unit_row(const float* row, std::size_t d) {
  const float norm = std::max(row_norm(row, d), kEpsilon);
  std::vector<float> out(d);
  for (std::size_t m = 0; m < d; ++m) out[m] = row[m] / norm;
  return out;
}

float unit_dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t m = 0; m < a.size(); ++m) sum += static_cast<double>(a[m]) * b[m];
  return static_cast<float>(sum);
}

}  // namespace

float torch_quantile_f32(std::vector<float> x, double q) {
  if (x.empty()) throw std::invalid_argument("torch_quantile_f32: empty row");
  std::sort(x.begin(), x.end());  // ascending, −∞ first (no NaN here: similarities are finite)
  const float last_index = static_cast<float>(x.size() - 1);
  const float rank = static_cast<float>(q) * last_index;
  const auto below = static_cast<std::size_t>(rank);  // truncation, as .toType(kLong)
  const auto above = static_cast<std::size_t>(std::ceil(rank));
  const float weight = rank - static_cast<float>(below);
  const float a = x[below];
  const float b = x[std::min(above, x.size() - 1)];
  // torch's lerp: a + w(b − a) for |w| < 0.5, else b − (b − a)(1 − w); with a = −∞ this gives NaN
  // (w < 0.5: −∞ + w·∞, and 0·∞ at w = 0) or −∞ (w ≥ 0.5).
  return weight < 0.5f ? a + weight * (b - a) : b - (b - a) * (1.0f - weight);
}

std::vector<ValueReplacement> merge_evicted_values(std::span<const float> keys,
                                                   std::span<const float> values, int length,
                                                   int head_dim,
                                                   std::span<const std::int64_t> kept_in_rank_order,
                                                   const MergeRule& rule, bool model_is_bf16) {
  const auto L = static_cast<std::size_t>(length);
  const auto d = static_cast<std::size_t>(head_dim);
  if (keys.size() != L * d || values.size() != L * d)
    throw std::invalid_argument("merge_evicted_values: keys/values are not [length, head_dim]");
  std::vector<char> is_kept(L, 0);
  for (const std::int64_t p : kept_in_rank_order) {
    if (p < 0 || static_cast<std::size_t>(p) >= L || is_kept[static_cast<std::size_t>(p)])
      throw std::invalid_argument("merge_evicted_values: kept positions out of range or repeated");
    is_kept[static_cast<std::size_t>(p)] = 1;
  }
  std::vector<std::size_t> evicted;
  for (std::size_t j = 0; j < L; ++j)
    if (!is_kept[j]) evicted.push_back(j);
  const std::size_t n_kept = kept_in_rank_order.size();
  if (evicted.empty() || n_kept == 0) return {};

  const auto key_row = [&](std::size_t j) { return keys.data() + j * d; };
  const auto value_row = [&](std::size_t j) { return values.data() + j * d; };
  std::vector<std::vector<float>> kept_unit(n_kept);
  for (std::size_t t = 0; t < n_kept; ++t)
    kept_unit[t] = unit_row(key_row(static_cast<std::size_t>(kept_in_rank_order[t])), d);

  // Nearest kept entry of each evicted token (first maximum in topk order).
  const std::size_t n_evicted = evicted.size();
  std::vector<float> similarity(n_evicted);
  std::vector<std::size_t> target(n_evicted);
  for (std::size_t e = 0; e < n_evicted; ++e) {
    const auto unit = unit_row(key_row(evicted[e]), d);
    float best = -std::numeric_limits<float>::infinity();
    std::size_t best_t = 0;
    for (std::size_t t = 0; t < n_kept; ++t) {
      const float s = unit_dot(unit, kept_unit[t]);
      if (s > best) {
        best = s;
        best_t = t;
      }
    }
    similarity[e] = best;
    target[e] = best_t;
  }

  // Gates.
  const auto threshold = static_cast<float>(rule.similarity_threshold);
  std::vector<char> merge_ok(n_evicted);
  bool any_ok = false;
  for (std::size_t e = 0; e < n_evicted; ++e) {
    merge_ok[e] = similarity[e] >= threshold;
    any_ok = any_ok || merge_ok[e];
  }
  if (rule.merge_fraction < 1.0 && any_ok) {
    std::vector<float> gated(n_evicted);
    for (std::size_t e = 0; e < n_evicted; ++e)
      gated[e] = merge_ok[e] ? similarity[e] : -std::numeric_limits<float>::infinity();
    const float cut = torch_quantile_f32(std::move(gated), 1.0 - rule.merge_fraction);
    for (std::size_t e = 0; e < n_evicted; ++e)
      merge_ok[e] = merge_ok[e] && similarity[e] >= cut;  // false against a NaN cut
  }

  // Weighted sums per kept entry, accumulated in f32 in ascending evicted position.
  std::vector<float> value_sum(n_kept * d, 0.0f);
  std::vector<float> weight_sum(n_kept, 0.0f);
  for (std::size_t e = 0; e < n_evicted; ++e) {
    const std::size_t t = target[e];
    const float* v_e = value_row(evicted[e]);
    const float evicted_norm = row_norm(v_e, d);
    const float target_norm =
        row_norm(value_row(static_cast<std::size_t>(kept_in_rank_order[t])), d);
    const float gate = merge_ok[e] ? std::max(similarity[e], 0.0f) : 0.0f;
    const float weight = gate * evicted_norm / (evicted_norm + target_norm + kEpsilon);
    for (std::size_t m = 0; m < d; ++m) value_sum[t * d + m] += weight * v_e[m];
    weight_sum[t] += weight;
  }

  std::vector<ValueReplacement> out;
  for (std::size_t t = 0; t < n_kept; ++t) {
    if (!(weight_sum[t] > 0.0f)) continue;
    const auto position = static_cast<std::size_t>(kept_in_rank_order[t]);
    const float* v_t = value_row(position);
    const float denominator = 1.0f + weight_sum[t];
    ValueReplacement replacement{.layer = 0,
                                 .kv_head = 0,
                                 .position = static_cast<std::int32_t>(position),
                                 .value = std::vector<float>(d)};
    for (std::size_t m = 0; m < d; ++m)
      replacement.value[m] =
          maybe_bf16((v_t[m] + value_sum[t * d + m]) / denominator, model_is_bf16);
    out.push_back(std::move(replacement));
  }
  std::sort(out.begin(), out.end(), [](const ValueReplacement& a, const ValueReplacement& b) {
    return a.position < b.position;
  });
  return out;
}

MergingMethod::MergingMethod(std::shared_ptr<const Scorer> scorer, MergeRule rule)
    : ScorerWrapperMethod("merging", std::move(scorer)), rule_(rule) {
  if (!scorer_) throw std::invalid_argument("merging: null scorer");
  if (!(rule_.similarity_threshold >= 0.0 && rule_.similarity_threshold <= 1.0))
    throw std::invalid_argument("merging: similarity_threshold must be in [0, 1]");
  if (!(rule_.merge_fraction > 0.0 && rule_.merge_fraction <= 1.0))
    throw std::invalid_argument("merging: merge_fraction must be in (0, 1]");
}

Selection MergingMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  const auto length = static_cast<std::size_t>(L);
  Selection selection;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerCapture& layer = layers[l];
    const auto scores = score_layer(*scorer_, layer, budget, context);
    auto& kept_layer = selection.kept.emplace_back();
    for (int h = 0; h < layer.num_kv_heads; ++h) {
      const auto head = static_cast<std::size_t>(h);
      const auto ranked =
          torch_top_k_ranked(std::span<const float>(scores).subspan(head * length, length), n_kept);
      auto& kept = kept_layer.emplace_back();
      for (const std::int64_t p : ranked) kept.push_back(static_cast<std::int32_t>(p));
      std::sort(kept.begin(), kept.end());
      for (auto& replacement :
           merge_evicted_values(layer.keys[head], layer.values[head], L, layer.head_dim, ranked,
                                rule_, layer.model_is_bf16)) {
        replacement.layer = static_cast<std::int32_t>(l);
        replacement.kv_head = static_cast<std::int32_t>(h);
        selection.value_replacements.push_back(std::move(replacement));
      }
    }
  }
  return selection;
}

}  // namespace kvaudit::methods
