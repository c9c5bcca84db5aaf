// LagKvScorer (lagkv.h): lag-relative min-max normalisation, channel std, softmax within each
// partition, ranks within partitions; sinks, the last partition and the remainder score 1.
#include "methods/lagkv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

// π_X(t) for the lag tokens t of one partition of X ([L, d] row-major), whose tokens start at
// `begin` and whose reference partition starts at begin + lag.
std::vector<float> partition_softmax_of_std(const float* x, std::size_t d, std::size_t begin,
                                            std::size_t lag, bool bf16) {
  const float* ref = x + (begin + lag) * d;
  std::vector<float> lo(d, std::numeric_limits<float>::infinity());
  std::vector<float> hi(d, -std::numeric_limits<float>::infinity());
  for (std::size_t u = 0; u < lag; ++u)
    for (std::size_t c = 0; c < d; ++c) {
      lo[c] = std::min(lo[c], ref[u * d + c]);
      hi[c] = std::max(hi[c], ref[u * d + c]);
    }
  std::vector<float> range(d);
  for (std::size_t c = 0; c < d; ++c) range[c] = maybe_bf16(hi[c] - lo[c], bf16);

  std::vector<double> deviation(lag);
  std::vector<float> z(d);
  for (std::size_t t = 0; t < lag; ++t) {
    const float* row = x + (begin + t) * d;
    double mean = 0.0;
    for (std::size_t c = 0; c < d; ++c) {
      z[c] = maybe_bf16(maybe_bf16(row[c] - lo[c], bf16) / range[c], bf16);
      mean += z[c];
    }
    mean /= static_cast<double>(d);
    double squares = 0.0;
    for (std::size_t c = 0; c < d; ++c) squares += (z[c] - mean) * (z[c] - mean);
    // torch.std: unbiased (d − 1); the result is a tensor of the model dtype.
    deviation[t] =
        maybe_bf16(static_cast<float>(std::sqrt(squares / static_cast<double>(d - 1))), bf16);
  }
  // softmax over the partition's tokens (torch: fp32 inside, cast to the model dtype).
  const double peak = *std::max_element(deviation.begin(), deviation.end());
  double total = 0.0;
  for (double& e : deviation) {
    e = std::exp(e - peak);
    total += e;
  }
  std::vector<float> out(lag);
  for (std::size_t t = 0; t < lag; ++t)
    out[t] = maybe_bf16(static_cast<float>(deviation[t] / total), bf16);
  return out;
}

// Rank of each score within `scores` (0 = smallest), as argsort().argsort() on torch's CPU: the
// sort is std::sort of (value, index) pairs in index order with NaN last (ATen SortingKernel).
std::vector<std::size_t> ranks_as_torch(const std::vector<float>& scores) {
  std::vector<std::pair<float, std::size_t>> order(scores.size());
  for (std::size_t t = 0; t < scores.size(); ++t) order[t] = {scores[t], t};
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return (!std::isnan(a.first) && std::isnan(b.first)) || a.first < b.first;
  });
  std::vector<std::size_t> rank(scores.size());
  for (std::size_t r = 0; r < order.size(); ++r) rank[order[r].second] = r;
  return rank;
}

}  // namespace

LagKvScorer::LagKvScorer(const LagKvParams& params) : params_(params) {
  if (params.n_sink < 0)
    throw std::invalid_argument("lagkv: n_sink must be >= 0, got " + std::to_string(params.n_sink));
  if (params.lag_size < 1)
    throw std::invalid_argument("lagkv: lag_size must be >= 1, got " +
                                std::to_string(params.lag_size));
}

void LagKvScorer::score(const LayerCapture& layer, const SelectionContext&,
                        std::span<float> scores) const {
  check_capture_basics(layer, name());
  const bool bf16 = layer.model_is_bf16;
  const std::size_t L = to_size(layer.length);
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t n_sink = to_size(params_.n_sink);
  const std::size_t lag = to_size(params_.lag_size);
  std::fill(scores.begin(), scores.end(), 1.0f);

  if (L < n_sink + 2 * lag) {
    // No partition has a reference: sinks 1, then the ramp i / (L − n_sink) (fp32 division, cast).
    if (L <= n_sink) return;
    const auto span_len = static_cast<float>(L - n_sink);
    for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h)
      for (std::size_t i = 0; i < L - n_sink; ++i)
        scores[h * L + n_sink + i] = maybe_bf16(static_cast<float>(i) / span_len, bf16);
    return;
  }

  const std::size_t partitions = (L - n_sink) / lag;  // ≥ 2
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    const float* keys = layer.keys[h].data();
    const float* values = layer.values[h].data();
    for (std::size_t p = 0; p + 1 < partitions; ++p) {
      const std::size_t begin = n_sink + p * lag;
      const auto key_part = partition_softmax_of_std(keys, d, begin, lag, bf16);
      const auto value_part = partition_softmax_of_std(values, d, begin, lag, bf16);
      std::vector<float> combined(lag);
      for (std::size_t t = 0; t < lag; ++t)
        combined[t] = maybe_bf16(maybe_bf16(key_part[t] + value_part[t], bf16) / 2.0f, bf16);
      if (!params_.cross_scoring) {
        const auto rank = ranks_as_torch(combined);
        for (std::size_t t = 0; t < lag; ++t)
          combined[t] = maybe_bf16(static_cast<float>(rank[t]) / static_cast<float>(lag), bf16);
      }
      std::copy(combined.begin(), combined.end(),
                scores.begin() + static_cast<std::ptrdiff_t>(h * L + begin));
    }
  }
}

}  // namespace kvaudit::methods
