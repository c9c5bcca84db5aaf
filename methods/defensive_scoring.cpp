// DefensiveKV per-layer scoring (defensive_scoring.h, which states the formulas, the source and
// every reproduced quirk). Source: FFY0/DefensiveKV @9251b95,
// kvpress/presses/efficient_defensivekv_press.py l.78–215; docs/design/original-methods.md
// §DefensiveKV scoring.
#include "methods/defensive_scoring.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {
namespace {

// Step 2 for one window row: avg_pool1d(kernel 5, padding 2, stride 1, count_include_pad) over
// the P prefix entries, then rescaled so the row keeps its original mass.
void pool_and_rescale(const float* row, std::size_t prefix, float* pooled) {
  constexpr auto half = static_cast<std::ptrdiff_t>(kDefensivePoolKernel / 2);
  const auto p = static_cast<std::ptrdiff_t>(prefix);
  double row_mass = 0.0;
  double pooled_mass = 0.0;
  for (std::ptrdiff_t j = 0; j < p; ++j) {
    row_mass += row[j];
    double window_sum = 0.0;
    for (std::ptrdiff_t t = std::max<std::ptrdiff_t>(0, j - half); t <= std::min(p - 1, j + half);
         ++t)
      window_sum += row[t];
    pooled[j] = static_cast<float>(window_sum / kDefensivePoolKernel);
    pooled_mass += pooled[j];
  }
  // A row without prefix mass stays zero (torch would divide 0 by 0).
  if (pooled_mass <= 0.0) return;
  const double factor = row_mass / pooled_mass;
  for (std::ptrdiff_t j = 0; j < p; ++j)
    pooled[j] = static_cast<float>(static_cast<double>(pooled[j]) * factor);
}

// N_h(j) = Σ_o |Σ_c V[k(h), j, c]·o_proj[o, h·d + c]| for j < P. Like the Triton kernel, the
// projection accumulates in fp32 (over c, in order); the L1 sum over o runs in double. The o_proj
// block of head h is transposed to [d, D] so the inner loop over o is contiguous.
std::vector<double> value_output_norms(const LayerCapture& layer, std::size_t prefix) {
  const std::size_t H = to_size(layer.num_heads);
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t D = to_size(layer.hidden_size);
  const std::size_t hd = H * d;
  std::vector<double> norms(H * prefix, 0.0);
  std::vector<float> block(d * D);
  std::vector<float> projected(D);
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t o = 0; o < D; ++o)
      for (std::size_t c = 0; c < d; ++c) block[c * D + o] = layer.o_proj[o * hd + h * d + c];
    const float* values = layer.values[to_size(layer.kv_head_of(static_cast<int>(h)))].data();
    for (std::size_t j = 0; j < prefix; ++j) {
      const float* v = values + j * d;
      std::fill(projected.begin(), projected.end(), 0.0f);
      for (std::size_t c = 0; c < d; ++c) {
        const float vc = v[c];
        const float* row = block.data() + c * D;
        for (std::size_t o = 0; o < D; ++o) projected[o] += vc * row[o];
      }
      double l1 = 0.0;
      for (std::size_t o = 0; o < D; ++o) l1 += std::abs(projected[o]);
      norms[h * prefix + j] = l1;
    }
  }
  return norms;
}

// c_k: tokens strictly before the first descending cumulative sum of p that reaches tau.
std::int64_t count_before_crossing(std::span<const float> p, double tau) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  double cumulative = 0.0;
  for (std::size_t r = 0; r < order.size(); ++r) {
    cumulative += p[order[r]];
    if (cumulative >= tau) return static_cast<std::int64_t>(r);
  }
  return 0;  // argmax of an all-false mask
}

}  // namespace

void check_defensive_compression(double compression, const std::string& method) {
  if (!(compression >= 0.0 && compression < 1.0))
    throw std::invalid_argument(method + ": budget compression " + std::to_string(compression) +
                                " is outside [0, 1)");
}

DefensiveLayerScores score_defensive_layer(const LayerCapture& layer, int window,
                                           double compression, const std::string& method) {
  check_window(layer, window, method);
  check_o_proj(layer, method);
  check_defensive_compression(compression, method);

  const std::size_t Hkv = to_size(layer.num_kv_heads);
  const std::size_t G = to_size(layer.group_size());
  const std::size_t L = to_size(layer.length);
  const std::size_t w = to_size(window);
  const std::size_t P = L - w;

  DefensiveLayerScores out;
  out.num_kv_heads = layer.num_kv_heads;
  out.length = layer.length;
  out.window = window;

  // Step 1: [H, w, L] window attention (entries j ≥ P are the window columns, dropped below).
  const std::vector<float> attn = window_attention(layer, window);
  auto row_of = [&](std::size_t h, std::size_t i) { return attn.data() + (h * w + i) * L; };

  // Window bias b (quirk: the w columns just before the window).
  const std::size_t bias_begin = P > w ? P - w : 0;
  double bias_total = 0.0;
  for (std::size_t h = 0; h < to_size(layer.num_heads); ++h)
    for (std::size_t i = 0; i < w; ++i) {
      const float* row = row_of(h, i);
      for (std::size_t j = bias_begin; j < P; ++j) bias_total += row[j];
    }
  out.window_bias = bias_total / static_cast<double>(to_size(layer.num_heads) * w);

  // Steps 2–3 and the unpooled group/window mean ā_k for stage 1.
  out.worst_case.assign(Hkv * P, 0.0f);
  out.head_mean.assign(Hkv, 0.0f);
  out.defensive.assign(Hkv * P, 0.0f);
  out.mass_share.assign(Hkv * P, 0.0f);
  std::vector<float> pooled(P);
  for (std::size_t k = 0; k < Hkv; ++k) {
    float* m = out.worst_case.data() + k * P;
    std::vector<double> mean_attn(P, 0.0);
    bool first = true;
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < w; ++i) {
        const float* row = row_of(k * G + g, i);
        for (std::size_t j = 0; j < P; ++j) mean_attn[j] += row[j];
        pool_and_rescale(row, P, pooled.data());
        for (std::size_t j = 0; j < P; ++j) m[j] = first ? pooled[j] : std::max(m[j], pooled[j]);
        first = false;
      }
    double m_total = 0.0;
    for (std::size_t j = 0; j < P; ++j) m_total += m[j];
    const auto mu = static_cast<float>(m_total / static_cast<double>(P));
    out.head_mean[k] = mu;
    for (std::size_t j = 0; j < P; ++j) out.defensive[k * P + j] = std::max(m[j], mu);

    double mass_total = 0.0;
    for (std::size_t j = 0; j < P; ++j) mass_total += mean_attn[j];  // (the 1/(G·w) cancels)
    for (std::size_t j = 0; j < P; ++j)
      out.mass_share[k * P + j] =
          mass_total > 0.0 ? static_cast<float>(mean_attn[j] / mass_total) : 0.0f;
  }

  // Step 4: value-norm share across KV heads.
  const std::vector<double> norms = value_output_norms(layer, P);
  out.value_share.assign(Hkv * P, 0.0f);
  for (std::size_t j = 0; j < P; ++j) {
    std::vector<double> group_mean(Hkv, 0.0);
    double across_heads = 0.0;
    for (std::size_t k = 0; k < Hkv; ++k) {
      for (std::size_t g = 0; g < G; ++g) group_mean[k] += norms[(k * G + g) * P + j];
      group_mean[k] /= static_cast<double>(G);
      across_heads += group_mean[k];
    }
    for (std::size_t k = 0; k < Hkv; ++k)
      out.value_share[k * P + j] =
          across_heads > 0.0 ? static_cast<float>(group_mean[k] / across_heads) : 0.0f;
  }

  // s' = s·ν, M = max over the layer.
  out.scores.assign(Hkv * L, 0.0f);
  float max_score = -INFINITY;
  for (std::size_t k = 0; k < Hkv; ++k)
    for (std::size_t j = 0; j < P; ++j) {
      const float s = out.defensive[k * P + j] * out.value_share[k * P + j];
      out.scores[k * L + j] = s;
      max_score = std::max(max_score, s);
    }
  out.protect_value = max_score;

  // Step 5: stage-1 forcing. The clamp: Python int() of a float truncates toward zero.
  const double tau = kDefensiveMassThreshold - out.window_bias;
  const auto clamp_value = static_cast<std::int64_t>(
      std::trunc(static_cast<double>(P) * (1.0 - compression) - static_cast<double>(w)));
  const std::int64_t clamp = std::max<std::int64_t>(clamp_value, 0);  // see header: not reproduced
  out.forced_count.assign(Hkv, 0);
  for (std::size_t k = 0; k < Hkv; ++k) {
    const std::span<const float> p(out.mass_share.data() + k * P, P);
    const std::int64_t c = std::min(count_before_crossing(p, tau), clamp);
    out.forced_count[k] = c;
    std::vector<std::size_t> order(P);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    for (std::size_t r = 0; r < to_size(c); ++r) out.scores[k * L + order[r]] = max_score;
  }

  // Step 6: the window gets M (not M + 1).
  for (std::size_t k = 0; k < Hkv; ++k)
    for (std::size_t j = P; j < L; ++j) out.scores[k * L + j] = max_score;
  return out;
}

std::vector<std::vector<std::int32_t>> split_flat_top_k(std::span<const float> scores,
                                                        int num_kv_heads, int length,
                                                        std::int64_t count) {
  std::vector<std::vector<std::int32_t>> kept(to_size(num_kv_heads));
  for (const std::int64_t flat : top_k_ranked(scores, count))
    kept[to_size(flat / length)].push_back(static_cast<std::int32_t>(flat % length));
  for (auto& head : kept) std::sort(head.begin(), head.end());
  return kept;
}

}  // namespace kvaudit::methods
