// DuoAttentionMethod (duo_attention.h).
#include "methods/duo_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

void check_sizes(const DuoAttentionParams& p) {
  if (p.sink_size < 0) throw std::invalid_argument("duo_attention: sink_size must be >= 0");
  if (p.recent_size < 1) throw std::invalid_argument("duo_attention: recent_size must be >= 1");
}

// HF rotate_half RoPE of one vector at position p (θ_i = f32(p)·inv_freq_i in f32, as HF).
void rotate(const double* x, std::span<const float> inv_freq, int position, double* out) {
  const std::size_t half = inv_freq.size();
  for (std::size_t i = 0; i < half; ++i) {
    const float theta = static_cast<float>(position) * inv_freq[i];
    const auto c = static_cast<double>(static_cast<float>(std::cos(static_cast<double>(theta))));
    const auto s = static_cast<double>(static_cast<float>(std::sin(static_cast<double>(theta))));
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
}

// Mean over the L rows of a [heads, L, d] block, per head, in double; rounded to bf16 in bf16 mode
// (kvpress's mean in the model dtype).
std::vector<double> row_means(std::span<const float> rows, std::size_t heads, std::size_t L,
                              std::size_t d, bool bf16) {
  std::vector<double> out(heads * d, 0.0);
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t c = 0; c < d; ++c) out[h * d + c] += rows[(h * L + t) * d + c];
    for (std::size_t c = 0; c < d; ++c) {
      const double mean = out[h * d + c] / static_cast<double>(L);
      out[h * d + c] = bf16 ? static_cast<double>(round_to_bf16(static_cast<float>(mean))) : mean;
    }
  }
  return out;
}

}  // namespace

std::vector<double> duo_on_the_fly_head_scores(const LayerCapture& layer) {
  const std::string method = "duo_attention(on_the_fly)";
  check_capture_basics(layer, method);
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto Hkv = static_cast<std::size_t>(layer.num_kv_heads);
  if (layer.queries_prerope.size() != H * L * d || layer.keys_prerope.size() != Hkv * L * d)
    throw std::invalid_argument(method + ": layer " + std::to_string(layer.layer) +
                                " capture: queries_prerope [H, L, d] and keys_prerope "
                                "[Hkv, L, d] are required (the all-queries capture)");
  if (layer.rope_inv_freq.size() != d / 2)
    throw std::invalid_argument(method + ": layer " + std::to_string(layer.layer) +
                                " capture: rope_inv_freq must be [d/2]");
  const auto query_means = row_means(layer.queries_prerope, H, L, d, layer.model_is_bf16);
  const auto key_means = row_means(layer.keys_prerope, Hkv, L, d, layer.model_is_bf16);
  const int Q = kDuoOnTheFlyPositions;
  const std::size_t g = H / Hkv;
  const double sqrt_d = std::sqrt(static_cast<double>(d));
  // RoPE of every KV head's mean key at every position, computed once per layer.
  std::vector<double> keys(Hkv * static_cast<std::size_t>(Q) * d);
  for (std::size_t kv = 0; kv < Hkv; ++kv)
    for (int p = 0; p < Q; ++p)
      rotate(key_means.data() + kv * d, layer.rope_inv_freq, p,
             keys.data() + (kv * static_cast<std::size_t>(Q) + static_cast<std::size_t>(p)) * d);
  std::vector<double> out(Hkv, 0.0), query(d), logits(static_cast<std::size_t>(Q));
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t kv = h / g;
    rotate(query_means.data() + h * d, layer.rope_inv_freq, Q - 1, query.data());
    double max_logit = -INFINITY;
    for (std::size_t p = 0; p < static_cast<std::size_t>(Q); ++p) {
      const double* k = keys.data() + (kv * static_cast<std::size_t>(Q) + p) * d;
      double dot = 0.0;
      for (std::size_t c = 0; c < d; ++c) dot += query[c] * k[c];
      logits[p] = dot / sqrt_d;
      max_logit = std::max(max_logit, logits[p]);
    }
    double total = 0.0;
    for (double& v : logits) {
      v = std::exp(v - max_logit);
      total += v;
    }
    // Area under the cumulated attention curve: mean over i of Σ_{p≤i} a_p.
    double cumulated = 0.0, area = 0.0;
    for (const double v : logits) {
      cumulated += v / total;
      area += cumulated;
    }
    out[kv] += area / static_cast<double>(Q) / static_cast<double>(g);
  }
  return out;
}

std::vector<std::int32_t> duo_kept_positions(int length, bool streaming, int sink_size,
                                             int recent_size) {
  std::vector<std::int32_t> kept;
  const std::int64_t recent_begin = static_cast<std::int64_t>(length) - recent_size;
  if (!streaming || sink_size >= recent_begin) {
    kept.resize(static_cast<std::size_t>(length));
    std::iota(kept.begin(), kept.end(), 0);
    return kept;
  }
  for (std::int32_t j = 0; j < sink_size; ++j) kept.push_back(j);
  for (auto j = static_cast<std::int32_t>(recent_begin); j < length; ++j) kept.push_back(j);
  return kept;
}

DuoAttentionMethod::DuoAttentionMethod(DuoAttentionParams params)
    : params_(std::move(params)), source_(params_.pattern) {
  check_sizes(params_);
  if (params_.on_the_fly_scoring) {
    if (!params_.pattern.empty())
      throw std::invalid_argument(
          "duo_attention: variant on_the_fly computes the head scores "
          "from the prefill; it reads no pattern (remove `pattern`)");
    return;
  }
  if (params_.pattern.empty())
    throw std::invalid_argument("duo_attention: variant pattern needs the `pattern` file");
  head_scores_ = read_tsv_matrix(params_.pattern);
  for (double& v : head_scores_.values) v = std::clamp(v, 0.0, 1.0);
}

DuoAttentionMethod::DuoAttentionMethod(DuoAttentionParams params, ArtefactMatrix head_scores,
                                       std::string source)
    : params_(std::move(params)), source_(std::move(source)), head_scores_(std::move(head_scores)) {
  check_sizes(params_);
  params_.on_the_fly_scoring = false;
  if (head_scores_.rows < 1 || head_scores_.columns < 1 ||
      static_cast<std::int64_t>(head_scores_.values.size()) !=
          head_scores_.rows * head_scores_.columns)
    throw std::invalid_argument(source_ + ": head scores must be a non-empty [layers, KV heads]");
  for (double& v : head_scores_.values) v = std::clamp(v, 0.0, 1.0);
}

Selection DuoAttentionMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                     const SelectionContext&) const {
  const int L = check_layers(layers, name());
  const auto n_layers = static_cast<std::int64_t>(layers.size());
  const std::int64_t kv_heads = layers[0].num_kv_heads;
  if (!(budget.compression >= 0.0 && budget.compression < 1.0))
    throw std::invalid_argument(name() +
                                ": the budget ratio (head_compression_ratio) must be in "
                                "[0, 1)");
  std::vector<double> scores;
  if (params_.on_the_fly_scoring) {
    for (const auto& layer : layers) {
      const auto r = duo_on_the_fly_head_scores(layer);
      scores.insert(scores.end(), r.begin(), r.end());
    }
  } else {
    if (head_scores_.rows != n_layers || head_scores_.columns != kv_heads ||
        layers[0].num_layers != n_layers)
      throw std::invalid_argument(
          source_ + ": the pattern is " + std::to_string(head_scores_.rows) + " x " +
          std::to_string(head_scores_.columns) + " but the model has " +
          std::to_string(layers[0].num_layers) + " layers and " + std::to_string(kv_heads) +
          " KV heads (want one row per layer, one column per KV head)");
    scores = head_scores_.values;
  }
  const auto total = static_cast<std::int64_t>(scores.size());
  const auto n_pruned = static_cast<std::int64_t>(
      std::nearbyint(static_cast<double>(total) * budget.compression));  // half to even
  std::vector<std::int64_t> order(static_cast<std::size_t>(total));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return scores[static_cast<std::size_t>(a)] < scores[static_cast<std::size_t>(b)];
  });
  std::vector<bool> streaming(static_cast<std::size_t>(total), false);
  for (std::int64_t i = 0; i < std::min(n_pruned, total); ++i)
    streaming[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = true;
  Selection selection;
  for (std::int64_t l = 0; l < n_layers; ++l) {
    auto& per_head = selection.kept.emplace_back();
    for (std::int64_t h = 0; h < kv_heads; ++h)
      per_head.push_back(duo_kept_positions(L,
                                            streaming[static_cast<std::size_t>(l * kv_heads + h)],
                                            params_.sink_size, params_.recent_size));
  }
  return selection;
}

}  // namespace kvaudit::methods
