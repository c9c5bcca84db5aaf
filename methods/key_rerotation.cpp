// KeyRerotationMethod (key_rerotation.h).
#include "methods/key_rerotation.h"

#include <cmath>
#include <stdexcept>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"

namespace kvaudit::methods {

std::vector<float> rerotate_keys(std::span<const float> keys,
                                 std::span<const std::int32_t> positions,
                                 std::span<const float> inv_freq, int head_dim,
                                 bool model_is_bf16) {
  const auto d = static_cast<std::size_t>(head_dim);
  const std::size_t half = d / 2;
  if (d % 2 != 0 || inv_freq.size() != half || keys.size() != positions.size() * d)
    throw std::invalid_argument("rerotate_keys: shapes do not match (keys [n, d], inv_freq [d/2])");
  std::vector<float> out(keys.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    const float delta = static_cast<float>(static_cast<std::int64_t>(i) - positions[i]);
    const float* k = keys.data() + i * d;
    float* o = out.data() + i * d;
    for (std::size_t m = 0; m < d; ++m) {
      const float angle = delta * inv_freq[m % half];
      const float c = maybe_bf16(std::cos(angle), model_is_bf16);
      const float s = maybe_bf16(std::sin(angle), model_is_bf16);
      const float rotated = m < half ? -k[m + half] : k[m - half];
      const float a = maybe_bf16(k[m] * c, model_is_bf16);
      const float b = maybe_bf16(rotated * s, model_is_bf16);
      o[m] = maybe_bf16(a + b, model_is_bf16);
    }
  }
  return out;
}

KeyRerotationMethod::KeyRerotationMethod(std::shared_ptr<const Scorer> scorer)
    : ScorerWrapperMethod("key_rerotation", std::move(scorer)) {
  if (!scorer_) throw std::invalid_argument("key_rerotation: null scorer");
}

Selection KeyRerotationMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                      const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    selection.kept.push_back(per_head_top_k(scores, layer.num_kv_heads, L, n_kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
