// ExpectedAttentionStatsScorer (expected_attention_stats.h).
#include "methods/expected_attention_stats.h"

#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/expected_attention.h"

namespace kvaudit::methods {
namespace {

std::map<std::string, ArtefactTensor> load_statistics(const std::string& path) {
  return read_safetensors_tensors(path, {"query_mean", "query_cov"});
}

ExpectedAttentionParams scoring_params(const ExpectedAttentionStatsParams& p) {
  return {.n_future_positions = p.n_future_positions,
          .n_sink = p.n_sink,
          .use_covariance = p.use_covariance,
          .use_vnorm = p.use_vnorm,
          .epsilon = p.epsilon};
}

}  // namespace

ExpectedAttentionStatsScorer::ExpectedAttentionStatsScorer(ExpectedAttentionStatsParams params)
    : params_(std::move(params)), source_(params_.statistics) {
  auto tensors = load_statistics(params_.statistics);
  query_mean_ = std::move(tensors.at("query_mean"));
  query_cov_ = std::move(tensors.at("query_cov"));
  check_inputs();
}

ExpectedAttentionStatsScorer::ExpectedAttentionStatsScorer(ExpectedAttentionStatsParams params,
                                                           ArtefactTensor query_mean,
                                                           ArtefactTensor query_cov,
                                                           std::string source)
    : params_(std::move(params)),
      source_(std::move(source)),
      query_mean_(std::move(query_mean)),
      query_cov_(std::move(query_cov)) {
  check_inputs();
}

void ExpectedAttentionStatsScorer::check_inputs() const {
  if (params_.n_future_positions < 1)
    throw std::invalid_argument("expected_attention_stats: n_future_positions must be >= 1");
  if (params_.n_sink < 0)
    throw std::invalid_argument("expected_attention_stats: n_sink must be >= 0");
  if (!(params_.epsilon >= 0.0))
    throw std::invalid_argument("expected_attention_stats: epsilon must be >= 0");
  const auto& m = query_mean_.shape;
  const auto& c = query_cov_.shape;
  if (m.size() != 3 || c.size() != 4 || c[0] != m[0] || c[1] != m[1] || c[2] != m[2] ||
      c[3] != m[2] || static_cast<std::int64_t>(query_mean_.values.size()) != m[0] * m[1] * m[2] ||
      static_cast<std::int64_t>(query_cov_.values.size()) != m[0] * m[1] * m[2] * m[2])
    throw std::invalid_argument(source_ + ": query_mean " + shape_text(m) + " and query_cov " +
                                shape_text(c) +
                                " must be [layers, heads, d] and [layers, heads, d, d]");
}

void ExpectedAttentionStatsScorer::score(const LayerCapture& layer, const SelectionContext&,
                                         std::span<float> scores) const {
  check_capture_basics(layer, name());
  if (layer.layer < 0 || layer.layer >= layer.num_layers)
    throw std::invalid_argument(name() + ": layer index " + std::to_string(layer.layer) +
                                " outside the model's " + std::to_string(layer.num_layers));
  const auto& m = query_mean_.shape;
  if (m[0] != layer.num_layers || m[1] != layer.num_heads || m[2] != layer.head_dim)
    throw std::invalid_argument(source_ + ": query_mean is " + shape_text(m) +
                                " but the model has " + std::to_string(layer.num_layers) +
                                " layers, " + std::to_string(layer.num_heads) +
                                " query heads and head_dim " + std::to_string(layer.head_dim) +
                                " (the statistics belong to another model)");
  if (layer.rope_inv_freq.size() != static_cast<std::size_t>(layer.head_dim / 2))
    throw std::invalid_argument(name() + ": layer " + std::to_string(layer.layer) +
                                " capture: rope_inv_freq must be [d/2]");
  if (layer.length <= params_.n_sink)
    throw std::invalid_argument(name() + ": layer " + std::to_string(layer.layer) +
                                ": length must exceed n_sink (kvpress asserts it)");
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const bool bf16 = layer.model_is_bf16;
  const auto R =
      averaged_rope_rotation(layer.rope_inv_freq, layer.length, params_.n_future_positions);
  const std::size_t layer_offset = static_cast<std::size_t>(layer.layer) * H;
  std::vector<double> mu(d), cov(d * d);
  std::vector<double> mu_rot(H * d), cov_rot(params_.use_covariance ? H * d * d : 0);
  for (std::size_t h = 0; h < H; ++h) {
    const float* mean = query_mean_.values.data() + (layer_offset + h) * d;
    const float* covariance = query_cov_.values.data() + (layer_offset + h) * d * d;
    for (std::size_t a = 0; a < d; ++a) mu[a] = maybe_bf16(mean[a], bf16);
    for (std::size_t a = 0; a < d * d; ++a) cov[a] = maybe_bf16(covariance[a], bf16);
    rotate_query_statistics(mu.data(), cov.data(), R, d, params_.use_covariance,
                            mu_rot.data() + h * d,
                            params_.use_covariance ? cov_rot.data() + h * d * d : nullptr);
  }
  expected_attention_scores(layer, scoring_params(params_), mu_rot, cov_rot, scores);
}

}  // namespace kvaudit::methods
