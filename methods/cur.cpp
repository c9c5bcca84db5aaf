// CurScorer (cur.h): squared key/value norms, optionally normalised within local windows,
// combined, normalised over the head; sinks score 1.
#include "methods/cur.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

// ‖X_j‖₂² for every row of X ([L, d]); each square and the sum in the model dtype.
std::vector<float> squared_norms(std::span<const float> x, std::size_t length, std::size_t d,
                                 bool bf16) {
  std::vector<float> out(length);
  for (std::size_t j = 0; j < length; ++j) {
    double sum = 0.0;
    for (std::size_t c = 0; c < d; ++c) {
      const float v = x[j * d + c];
      sum += maybe_bf16(v * v, bf16);
    }
    out[j] = maybe_bf16(static_cast<float>(sum), bf16);
  }
  return out;
}

// Divides each entry by the sum of its window of `window` consecutive positions (the last window
// may be shorter: kvpress pads it with zeros).
void normalise_in_windows(std::vector<float>& norms, std::size_t window, bool bf16) {
  for (std::size_t begin = 0; begin < norms.size(); begin += window) {
    const std::size_t end = std::min(norms.size(), begin + window);
    double sum = 0.0;
    for (std::size_t j = begin; j < end; ++j) sum += norms[j];
    const float total = maybe_bf16(static_cast<float>(sum), bf16);
    for (std::size_t j = begin; j < end; ++j) norms[j] = maybe_bf16(norms[j] / total, bf16);
  }
}

}  // namespace

CurScorer::CurScorer(const CurParams& params) : params_(params) {
  if (params.num_sinks < 0)
    throw std::invalid_argument("cur: num_sinks must be >= 0, got " +
                                std::to_string(params.num_sinks));
  if (params.local_window_size < 1)
    throw std::invalid_argument("cur: local_window_size must be >= 1, got " +
                                std::to_string(params.local_window_size));
}

void CurScorer::score(const LayerCapture& layer, const SelectionContext&,
                      std::span<float> scores) const {
  check_capture_basics(layer, name());
  const bool bf16 = layer.model_is_bf16;
  const std::size_t L = to_size(layer.length);
  const std::size_t d = to_size(layer.head_dim);
  for (std::size_t h = 0; h < to_size(layer.num_kv_heads); ++h) {
    std::vector<float> key_norms = squared_norms(layer.keys[h], L, d, bf16);
    std::vector<float> value_norms = squared_norms(layer.values[h], L, d, bf16);
    if (params_.use_local_approximation) {
      normalise_in_windows(key_norms, to_size(params_.local_window_size), bf16);
      normalise_in_windows(value_norms, to_size(params_.local_window_size), bf16);
    }
    std::span<float> head = scores.subspan(h * L, L);
    for (std::size_t j = 0; j < L; ++j) {
      switch (params_.leverage_type) {
        case CurLeverage::key:
          head[j] = key_norms[j];
          break;
        case CurLeverage::value:
          head[j] = value_norms[j];
          break;
        case CurLeverage::kv_avg:
          head[j] = maybe_bf16(maybe_bf16(key_norms[j] + value_norms[j], bf16) / 2.0f, bf16);
          break;
        case CurLeverage::kv_product:
          head[j] = maybe_bf16(key_norms[j] * value_norms[j], bf16);
          break;
      }
    }
    double sum = 0.0;
    for (const float s : head) sum += s;
    const float total = maybe_bf16(static_cast<float>(sum), bf16);
    for (float& s : head) s = maybe_bf16(s / total, bf16);
    std::fill(head.begin(),
              head.begin() + static_cast<std::ptrdiff_t>(std::min(L, to_size(params_.num_sinks))),
              1.0f);
  }
}

}  // namespace kvaudit::methods
