// TovaScorer (tova.h).
#include "methods/tova.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {

void TovaScorer::score(const LayerCapture& layer, const SelectionContext&,
                       std::span<float> scores) const {
  const bool kvpress = variant_ == TovaVariant::kvpress;
  if (kvpress) {
    check_window(layer, 1, name());
  } else {
    // The original scores every position including the last; only L ≥ 1 and one row are needed.
    check_capture_basics(layer, name());
    if (layer.window_rows < 1 ||
        layer.window_queries.size() != static_cast<std::size_t>(layer.num_heads) *
                                           static_cast<std::size_t>(layer.window_rows) *
                                           static_cast<std::size_t>(layer.head_dim))
      throw std::invalid_argument("tova: layer " + std::to_string(layer.layer) +
                                  " capture: needs at least 1 window row");
  }
  const auto L = static_cast<std::size_t>(layer.length);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto attn = window_attention(layer, 1);  // [H, 1, L]
  const std::size_t scored = kvpress ? L - 1 : L;
  std::vector<float> mean(L, 0.0f);
  for (std::size_t j = 0; j < scored; ++j) {
    double sum = 0.0;
    for (std::size_t h = 0; h < H; ++h) sum += attn[h * L + j];
    mean[j] = maybe_bf16(static_cast<float>(sum / static_cast<double>(H)), layer.model_is_bf16);
  }
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(layer.num_kv_heads); ++kv)
    std::copy(mean.begin(), mean.end(), scores.begin() + static_cast<std::ptrdiff_t>(kv * L));
  if (kvpress) {
    protect_with_max_plus_one(scores, layer.length, layer.length - 1, layer.length);
    if (layer.model_is_bf16)
      for (float& s : scores) s = round_to_bf16(s);
  }
}

}  // namespace kvaudit::methods
