// DefensiveKV selection (defensivekv.h): n_kept = int(L·(1 − cr)·Hkv) per layer over the
// flattened Hkv·L defensive scores, head budgets adaptive. Source: FFY0/DefensiveKV @9251b95,
// efficient_ada_scorer_press.py `compress` (l.46); Feng et al. 2025, arXiv 2510.13334.
// Quirks reproduced: no max(1, ·) on n_kept; cr = 0 returns everything; the scores' own quirks are
// listed in defensive_scoring.h.
#include "methods/defensivekv.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/defensive_scoring.h"

namespace kvaudit::methods {

DefensiveKvMethod::DefensiveKvMethod(int window) : window_(window) {
  if (window < 1)
    throw std::invalid_argument("defensivekv: window must be >= 1, got " + std::to_string(window));
}

Selection DefensiveKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                    const SelectionContext& context) const {
  (void)context;
  const int length = check_layers(layers, name());
  check_defensive_compression(budget.compression, name());
  Selection selection;
  for (const auto& layer : layers) {
    if (budget.compression == 0.0) {
      check_window(layer, window_, name());
      check_o_proj(layer, name());
      std::vector<std::int32_t> all(static_cast<std::size_t>(length));
      std::iota(all.begin(), all.end(), 0);
      selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), all);
      continue;
    }
    const auto scored = score_defensive_layer(layer, window_, budget.compression, name());
    // Python: int(q_len * (1 - cr) * num_key_value_heads), evaluated left to right.
    const auto n_kept = static_cast<std::int64_t>(
        std::trunc(static_cast<double>(length) * (1.0 - budget.compression) * layer.num_kv_heads));
    selection.kept.push_back(split_flat_top_k(scored.scores, layer.num_kv_heads, length, n_kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
