// H2O (h2o.h): per KV head, the last `recent` positions plus the `heavy` highest unnormalised
// column sums s_k(j) = mean_g Σ_i A_g(i, j) among the older positions; heavy = int(f·r·L),
// recent = int((1 − f)·r·L), r = 1 − cr. Zhang et al. 2023, arXiv 2306.14048; FMInference/H2O
// @ac75c2a h2o_hf/utils_hh/modify_llama.py l.122–163. Quirks and deviations: see h2o.h.
#include "methods/h2o.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

H2oSplit h2o_split(std::int64_t length, double compression, double heavy_fraction) {
  if (!(compression >= 0.0 && compression < 1.0))
    throw std::invalid_argument("h2o: budget compression " + std::to_string(compression) +
                                " is outside [0, 1)");
  const double retention = 1.0 - compression;
  const double heavy_ratio = heavy_fraction * retention;
  const double recent_ratio = (1.0 - heavy_fraction) * retention;
  H2oSplit split;
  split.heavy = static_cast<std::int64_t>(std::trunc(heavy_ratio * static_cast<double>(length)));
  split.recent = static_cast<std::int64_t>(std::trunc(recent_ratio * static_cast<double>(length)));
  if (split.heavy + split.recent == 0) split.recent = 1;
  return split;
}

H2oMethod::H2oMethod(double heavy_fraction) : heavy_fraction_(heavy_fraction) {
  if (!(heavy_fraction >= 0.0 && heavy_fraction <= 1.0))
    throw std::invalid_argument("h2o: heavy_fraction " + std::to_string(heavy_fraction) +
                                " is outside [0, 1]");
}

Selection H2oMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                            const SelectionContext& context) const {
  (void)context;
  const int length = check_layers(layers, name());
  const H2oSplit split = h2o_split(length, budget.compression, heavy_fraction_);
  const auto L = static_cast<std::size_t>(length);
  Selection selection;
  for (const auto& layer : layers) {
    check_column_sums(layer, name());
    const auto Hkv = static_cast<std::size_t>(layer.num_kv_heads);
    const auto G = static_cast<std::size_t>(layer.group_size());
    std::vector<std::vector<std::int32_t>> kept(Hkv);
    for (std::size_t k = 0; k < Hkv; ++k) {
      if (budget.compression == 0.0) {
        kept[k].resize(L);
        std::iota(kept[k].begin(), kept[k].end(), 0);
        continue;
      }
      const std::size_t recent = std::min(L, static_cast<std::size_t>(split.recent));
      const std::size_t older = L - recent;
      std::vector<float> score(older);
      for (std::size_t j = 0; j < older; ++j) {
        double sum = 0.0;
        for (std::size_t g = 0; g < G; ++g) sum += layer.column_sums[(k * G + g) * L + j];
        score[j] = static_cast<float>(sum / static_cast<double>(G));
      }
      kept[k] = top_k_positions(score, split.heavy);
      for (std::size_t j = older; j < L; ++j) kept[k].push_back(static_cast<std::int32_t>(j));
    }
    selection.kept.push_back(std::move(kept));
  }
  return selection;
}

}  // namespace kvaudit::methods
