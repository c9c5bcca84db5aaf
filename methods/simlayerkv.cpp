// SimLayerKvMethod (simlayerkv.h): a layer is lazy when the last n_last queries put more than τ of
// their attention on the n_initial first tokens and the n_recent tokens before the window; lazy
// layers keep the initial and the last n_recent − n_last tokens, others keep everything.
#include "methods/simlayerkv.h"

#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {
namespace {

void check_simlayerkv_threshold(double threshold) {
  if (!std::isfinite(threshold) || threshold <= 0.0)
    throw std::invalid_argument("simlayerkv: budget threshold (lazy_threshold) " +
                                std::to_string(threshold) + " must be finite and > 0");
}

std::vector<std::int32_t> all_positions(std::int64_t length) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(length));
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<std::int32_t>(j);
  return out;
}

}  // namespace

SimLayerKvMethod::SimLayerKvMethod(const SimLayerKvParams& params) : params_(params) {
  if (params.n_last < 1)
    throw std::invalid_argument("simlayerkv: n_last must be >= 1, got " +
                                std::to_string(params.n_last));
  if (params.n_initial < 0)
    throw std::invalid_argument("simlayerkv: n_initial must be >= 0, got " +
                                std::to_string(params.n_initial));
  if (params.n_recent <= params.n_last)
    throw std::invalid_argument("simlayerkv: n_recent (" + std::to_string(params.n_recent) +
                                ") must be greater than n_last (" + std::to_string(params.n_last) +
                                "): a lazy layer keeps the last n_recent - n_last tokens");
}

SimLayerKvLayerTest SimLayerKvMethod::test_layer(const LayerCapture& layer,
                                                 double threshold) const {
  check_simlayerkv_threshold(threshold);
  check_capture_basics(layer, name());
  SimLayerKvLayerTest test;
  const std::int64_t min_length =
      static_cast<std::int64_t>(params_.n_initial) + params_.n_recent + params_.n_last;
  test.compressible = threshold < 1.0 && layer.length > min_length;
  if (!test.compressible) return test;
  check_window(layer, params_.n_last, name());
  const bool bf16 = layer.model_is_bf16;
  const std::size_t L = to_size(layer.length);
  const std::size_t rows = to_size(layer.num_heads) * to_size(params_.n_last);
  const std::vector<float> attn = window_attention(layer, params_.n_last);  // [H, n_last, L]
  // a(j): mean over heads and window rows (one tensor of the model dtype).
  const auto mean_at = [&](std::size_t j) {
    double sum = 0.0;
    for (std::size_t r = 0; r < rows; ++r) sum += attn[r * L + j];
    return maybe_bf16(static_cast<float>(sum / static_cast<double>(rows)), bf16);
  };
  double initial = 0.0;
  for (std::size_t j = 0; j < to_size(params_.n_initial); ++j) initial += mean_at(j);
  // kvpress's window attention drops the window's own columns (j ≥ L − n_last): "recent" are the
  // n_recent columns before the window.
  const std::size_t scored_columns = L - to_size(params_.n_last);
  double recent = 0.0;
  for (std::size_t j = scored_columns - to_size(params_.n_recent); j < scored_columns; ++j)
    recent += mean_at(j);
  const float initial_sum = maybe_bf16(static_cast<float>(initial), bf16);
  const float recent_sum = maybe_bf16(static_cast<float>(recent), bf16);
  test.lazy_score = maybe_bf16(initial_sum + recent_sum, bf16);
  test.lazy = test.lazy_score > threshold;
  return test;
}

Selection SimLayerKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                   const SelectionContext& context) const {
  (void)context;
  const int length = check_layers(layers, name());
  check_simlayerkv_threshold(budget.threshold);
  Selection selection;
  for (const auto& layer : layers) {
    const SimLayerKvLayerTest test = test_layer(layer, budget.threshold);
    std::vector<std::int32_t> kept;
    if (test.lazy) {
      for (int j = 0; j < params_.n_initial; ++j) kept.push_back(j);
      for (int j = length - (params_.n_recent - params_.n_last); j < length; ++j) kept.push_back(j);
    } else {
      kept = all_positions(length);
    }
    selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), kept);
  }
  return selection;
}

}  // namespace kvaudit::methods
