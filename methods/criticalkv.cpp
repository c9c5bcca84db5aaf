// CriticalKvScorer (criticalkv.h).
#include "methods/criticalkv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<float> projected_value_l1_norms(const LayerCapture& layer) {
  check_o_proj(layer, "criticalkv");
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto D = static_cast<std::size_t>(layer.hidden_size);
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto g = static_cast<std::size_t>(layer.group_size());
  std::vector<double> sums(static_cast<std::size_t>(layer.num_kv_heads) * L, 0.0);
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t kv = h / g;
    const float* values = layer.values[kv].data();
    for (std::size_t j = 0; j < L; ++j) {
      double l1 = 0.0;
      for (std::size_t o = 0; o < D; ++o) {
        const float* w = layer.o_proj.data() + o * H * d + h * d;
        double acc = 0.0;
        for (std::size_t c = 0; c < d; ++c) acc += static_cast<double>(values[j * d + c]) * w[c];
        l1 += std::abs(acc);
      }
      sums[kv * L + j] += l1;
    }
  }
  std::vector<float> norms(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i)
    norms[i] = static_cast<float>(sums[i] / static_cast<double>(g));
  return norms;
}

CriticalKvScorer::CriticalKvScorer(std::shared_ptr<const Scorer> scorer, double first_stage_ratio,
                                   double epsilon)
    : scorer_(std::move(scorer)), first_stage_ratio_(first_stage_ratio), epsilon_(epsilon) {
  if (!scorer_) throw std::invalid_argument("criticalkv: null scorer");
  if (!(first_stage_ratio >= 0.0 && first_stage_ratio <= 1.0))
    throw std::invalid_argument("criticalkv: first_stage_ratio must be in [0, 1]");
  if (!(epsilon >= 0.0)) throw std::invalid_argument("criticalkv: epsilon must be >= 0");
}

void CriticalKvScorer::score(const LayerCapture&, const SelectionContext&, std::span<float>) const {
  throw std::logic_error("criticalkv: scores depend on the budget; call score_for_budget");
}

void CriticalKvScorer::score_for_budget(const LayerCapture& layer, const Budget& budget,
                                        const SelectionContext& context,
                                        std::span<float> scores) const {
  scorer_->score_for_budget(layer, budget, context, scores);
  const std::int64_t L = layer.length;
  // Python: int((1 - compression_ratio) * k_len * first_stage_ratio).
  auto stage1 = static_cast<std::int64_t>(
      std::floor((1.0 - budget.compression) * static_cast<double>(L) * first_stage_ratio_));
  if (first_stage_ratio_ > 0) stage1 = std::max<std::int64_t>(1, stage1);
  const auto norms = projected_value_l1_norms(layer);
  const auto l = static_cast<std::size_t>(L);
  for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h) {
    auto head = scores.subspan(h * l, l);
    const auto forced = torch_top_k_ranked(head, stage1);
    for (std::size_t j = 0; j < l; ++j)
      head[j] = (head[j] + static_cast<float>(epsilon_)) * norms[h * l + j];  // f32, as torch
    for (const auto j : forced)
      head[static_cast<std::size_t>(j)] = std::numeric_limits<float>::max();
  }
}

}  // namespace kvaudit::methods
