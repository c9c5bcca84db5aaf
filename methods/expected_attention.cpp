// ExpectedAttentionScorer (expected_attention.h).
#include "methods/expected_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<double> averaged_rope_rotation(std::span<const float> inv_freq, std::int64_t length,
                                           int n_future_positions) {
  const std::size_t half = inv_freq.size();
  const std::size_t d = 2 * half;
  std::vector<double> r(d * d, 0.0);
  for (int t = 0; t < n_future_positions; ++t) {
    const auto p = static_cast<float>(length + t);
    for (std::size_t i = 0; i < half; ++i) {
      const float theta = p * inv_freq[i];  // HF: inv_freq @ position_ids in f32
      const auto c = static_cast<double>(static_cast<float>(std::cos(static_cast<double>(theta))));
      const auto s = static_cast<double>(static_cast<float>(std::sin(static_cast<double>(theta))));
      r[i * d + i] += c;                    // R[i, i] = cos
      r[(i + half) * d + (i + half)] += c;  // R[d/2+i, d/2+i] = cos
      r[i * d + (i + half)] -= s;           // R[i, d/2+i] = −sin  (P[i, d/2+i] = −1)
      r[(i + half) * d + i] += s;           // R[d/2+i, i] = +sin  (P[d/2+i, i] = 1)
    }
  }
  for (double& v : r) v /= n_future_positions;
  return r;
}

ExpectedAttentionScorer::ExpectedAttentionScorer(ExpectedAttentionParams params) : params_(params) {
  if (params_.n_future_positions < 1)
    throw std::invalid_argument("expected_attention: n_future_positions must be >= 1");
  if (params_.n_sink < 0) throw std::invalid_argument("expected_attention: n_sink must be >= 0");
  if (!(params_.epsilon >= 0.0))
    throw std::invalid_argument("expected_attention: epsilon must be >= 0");
}

void rotate_query_statistics(const double* mean, const double* covariance,
                             std::span<const double> rotation, std::size_t head_dim,
                             bool with_covariance, double* mean_out, double* covariance_out) {
  const std::size_t d = head_dim;
  const double* R = rotation.data();
  for (std::size_t r = 0; r < d; ++r) {
    double acc = 0.0;
    for (std::size_t c = 0; c < d; ++c) acc += R[r * d + c] * mean[c];
    mean_out[r] = acc;
  }
  if (!with_covariance) return;
  // tmp = Σ R̄ᵀ, covariance_out = R̄ tmp.
  std::vector<double> tmp(d * d);
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = 0; b < d; ++b) {
      double acc = 0.0;
      for (std::size_t c = 0; c < d; ++c) acc += covariance[a * d + c] * R[b * d + c];
      tmp[a * d + b] = acc;
    }
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = 0; b < d; ++b) {
      double acc = 0.0;
      for (std::size_t c = 0; c < d; ++c) acc += R[a * d + c] * tmp[c * d + b];
      covariance_out[a * d + b] = acc;
    }
}

void rotate_query_moments(const double* query_sum, const double* query_outer, double n,
                          std::span<const double> rotation, std::size_t head_dim,
                          bool with_covariance, double* mean_out, double* covariance_out) {
  const std::size_t d = head_dim;
  std::vector<double> mu(d), cov(d * d);
  for (std::size_t a = 0; a < d; ++a) mu[a] = query_sum[a] / n;
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = 0; b < d; ++b) cov[a * d + b] = query_outer[a * d + b] / n - mu[a] * mu[b];
  rotate_query_statistics(mu.data(), cov.data(), rotation, head_dim, with_covariance, mean_out,
                          covariance_out);
}

void ExpectedAttentionScorer::score(const LayerCapture& layer, const SelectionContext&,
                                    std::span<float> scores) const {
  check_query_moments(layer, params_.n_sink, name());
  if (layer.length <= params_.n_sink)
    throw std::invalid_argument("expected_attention: layer " + std::to_string(layer.layer) +
                                ": length must exceed n_sink (kvpress asserts it)");
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto n = static_cast<double>(layer.query_count);
  const auto R =
      averaged_rope_rotation(layer.rope_inv_freq, layer.length, params_.n_future_positions);
  std::vector<double> mu_rot(H * d), cov_rot(params_.use_covariance ? H * d * d : 0);
  for (std::size_t h = 0; h < H; ++h)
    rotate_query_moments(layer.query_sum.data() + h * d, layer.query_outer.data() + h * d * d, n, R,
                         d, params_.use_covariance, mu_rot.data() + h * d,
                         params_.use_covariance ? cov_rot.data() + h * d * d : nullptr);
  expected_attention_scores(layer, params_, mu_rot, cov_rot, scores);
}

void expected_attention_scores(const LayerCapture& layer, const ExpectedAttentionParams& params,
                               std::span<const double> rotated_means,
                               std::span<const double> rotated_covariances,
                               std::span<float> scores) {
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto g = static_cast<std::size_t>(layer.group_size());
  const auto sink = static_cast<std::size_t>(params.n_sink);
  const double sqrt_d = std::sqrt(static_cast<double>(d));

  std::vector<double> group_sum((L - sink) * static_cast<std::size_t>(layer.num_kv_heads), 0.0);
  std::vector<double> z(L - sink);
  for (std::size_t h = 0; h < H; ++h) {
    const double* mu_rot = rotated_means.data() + h * d;
    const double* cov_rot =
        params.use_covariance ? rotated_covariances.data() + h * d * d : nullptr;
    const std::size_t kv = h / g;
    const float* keys = layer.keys[kv].data();
    double zmax = -INFINITY;
    for (std::size_t j = sink; j < L; ++j) {
      const float* k = keys + j * d;
      double lin = 0.0;
      for (std::size_t c = 0; c < d; ++c) lin += mu_rot[c] * k[c];
      double value = lin / sqrt_d;
      if (params.use_covariance) {
        double quad = 0.0;
        for (std::size_t a = 0; a < d; ++a) {
          double row = 0.0;
          for (std::size_t b = 0; b < d; ++b) row += cov_rot[a * d + b] * k[b];
          quad += k[a] * row;
        }
        value += quad / static_cast<double>(d) / 2.0;
      }
      z[j - sink] = value;
      zmax = std::max(zmax, value);
    }
    double total = 0.0;
    for (double& v : z) {
      v = std::exp(v - zmax);
      total += v;
    }
    for (std::size_t t = 0; t < z.size(); ++t) group_sum[kv * (L - sink) + t] += z[t] / total;
  }
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(layer.num_kv_heads); ++kv) {
    const float* values = layer.values[kv].data();
    for (std::size_t j = 0; j < L; ++j) {
      if (j < sink) {
        scores[kv * L + j] = 0.0f;
        continue;
      }
      double s = group_sum[kv * (L - sink) + (j - sink)] / static_cast<double>(g);
      if (params.use_vnorm) {
        double sq = 0.0;
        for (std::size_t c = 0; c < d; ++c)
          sq += static_cast<double>(values[j * d + c]) * values[j * d + c];
        s = (s + params.epsilon) * std::sqrt(sq);
      }
      scores[kv * L + j] = static_cast<float>(s);
    }
  }
  protect_with_max_plus_one(scores, layer.length, 0, params.n_sink);
}

}  // namespace kvaudit::methods
