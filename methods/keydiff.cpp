// KeyDiff one-shot scorer and block method (keydiff.h).
#include "methods/keydiff.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {

std::vector<float> keydiff_scores(std::span<const float> keys, int head_dim,
                                  std::span<const std::int32_t> positions) {
  const auto d = static_cast<std::size_t>(head_dim);
  std::vector<double> anchor(d, 0.0);
  std::vector<double> norms(positions.size());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const float* k = keys.data() + static_cast<std::size_t>(positions[t]) * d;
    double sq = 0.0;
    for (std::size_t c = 0; c < d; ++c) sq += static_cast<double>(k[c]) * k[c];
    norms[t] = std::sqrt(sq);
    const double denom = std::max(norms[t], 1e-12);
    for (std::size_t c = 0; c < d; ++c) anchor[c] += k[c] / denom;
  }
  double anchor_sq = 0.0;
  for (double& a : anchor) {
    a /= static_cast<double>(positions.size());
    anchor_sq += a * a;
  }
  const double anchor_norm = std::sqrt(anchor_sq);
  std::vector<float> scores(positions.size());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const float* k = keys.data() + static_cast<std::size_t>(positions[t]) * d;
    double dot = 0.0;
    for (std::size_t c = 0; c < d; ++c) dot += k[c] * anchor[c];
    scores[t] = static_cast<float>(-dot / std::max(norms[t] * anchor_norm, 1e-8));
  }
  return scores;
}

void KeyDiffScorer::score(const LayerCapture& layer, const SelectionContext&,
                          std::span<float> scores) const {
  check_capture_basics(layer, name());
  const auto L = static_cast<std::size_t>(layer.length);
  std::vector<std::int32_t> all(L);
  std::iota(all.begin(), all.end(), 0);
  for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h) {
    const auto s = keydiff_scores(layer.keys[h], layer.head_dim, all);
    std::copy(s.begin(), s.end(), scores.begin() + static_cast<std::ptrdiff_t>(h * L));
  }
}

BlockKeyDiffMethod::BlockKeyDiffMethod(int block_size) : block_size_(block_size) {
  if (block_size < 1) throw std::invalid_argument("keydiff(block): block_size must be >= 1");
}

Selection BlockKeyDiffMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                     const SelectionContext&) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  const int block = block_size_ < L ? block_size_ : L;
  Selection selection;
  for (const auto& layer : layers) {
    std::vector<std::vector<std::int32_t>> heads;
    for (int h = 0; h < layer.num_kv_heads; ++h) {
      std::vector<std::int32_t> kept(static_cast<std::size_t>(n_kept));
      std::iota(kept.begin(), kept.end(), 0);
      for (std::int64_t i = n_kept; i < L; i += block) {
        const std::int64_t end = std::min<std::int64_t>(i + block, L);
        std::vector<std::int32_t> candidates = kept;  // survivors first, then the block
        for (std::int64_t j = i; j < end; ++j) candidates.push_back(static_cast<std::int32_t>(j));
        const auto s =
            keydiff_scores(layer.keys[static_cast<std::size_t>(h)], layer.head_dim, candidates);
        // kvpress keeps the survivors in topk order and puts the next block after them.
        const auto best = torch_top_k_ranked(s, n_kept);  // indices into candidates, torch's order
        kept.clear();
        for (const auto idx : best) kept.push_back(candidates[static_cast<std::size_t>(idx)]);
      }
      std::sort(kept.begin(), kept.end());
      heads.push_back(std::move(kept));
    }
    selection.kept.push_back(std::move(heads));
  }
  return selection;
}

}  // namespace kvaudit::methods
