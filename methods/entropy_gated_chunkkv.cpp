// EntropyGatedChunkKvMethod (entropy_gated_chunkkv.h).
#include "methods/entropy_gated_chunkkv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

constexpr float kEntropyEpsilon = 1e-8f;

// Normalised entropy of one chunk's scores, in f32 as torch computes it.
float chunk_entropy(std::span<const float> scores) {
  const std::size_t n = scores.size();
  if (n == 1) return 0.0f;
  const float minimum = *std::min_element(scores.begin(), scores.end());
  const float shift = std::min(minimum, 0.0f);
  float total = 0.0f;
  for (const float s : scores) total += s - shift;
  float entropy = 0.0f;
  for (const float s : scores) {
    const float p = (s - shift) / (total + kEntropyEpsilon);
    entropy += p * std::log(p + kEntropyEpsilon);
  }
  const float normalised = -entropy / static_cast<float>(std::log(static_cast<double>(n)));
  return std::clamp(normalised, 0.0f, 1.0f);
}

// torch.median of a 1-D tensor: the lower of the two middle values for an even count.
float lower_median(std::vector<float> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

std::vector<std::int32_t> entropy_gated_chunk_selection(std::span<const float> token_scores,
                                                        std::int64_t budget, int chunk_length,
                                                        int low_entropy_chunk_length) {
  const auto L = static_cast<std::int64_t>(token_scores.size());
  const std::int64_t C = chunk_length;
  const std::int64_t n_chunks = (L + C - 1) / C;
  std::vector<float> means(static_cast<std::size_t>(n_chunks));
  std::vector<float> entropies(static_cast<std::size_t>(n_chunks));
  for (std::int64_t c = 0; c < n_chunks; ++c) {
    const std::int64_t begin = c * C;
    const std::int64_t end = std::min(begin + C, L);
    const auto chunk = token_scores.subspan(static_cast<std::size_t>(begin),
                                            static_cast<std::size_t>(end - begin));
    float sum = 0.0f;
    for (const float s : chunk) sum += s;
    means[static_cast<std::size_t>(c)] = sum / static_cast<float>(end - begin);
    entropies[static_cast<std::size_t>(c)] = chunk_entropy(chunk);
  }
  const float mean_threshold = lower_median(means);
  const float entropy_threshold = lower_median(entropies);
  // torch.argsort(descending=True) on the CPU: a stable sort, equal means keep index order.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_chunks));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return means[static_cast<std::size_t>(a)] > means[static_cast<std::size_t>(b)];
  });
  std::vector<char> keep(static_cast<std::size_t>(L), 0);
  std::int64_t left = budget;
  for (const std::int64_t c : order) {
    if (left <= 0) break;
    const std::int64_t begin = c * C;
    const std::int64_t end = std::min(begin + C, L);
    std::int64_t n = std::min(end - begin, left);
    const auto i = static_cast<std::size_t>(c);
    if (means[i] >= mean_threshold && entropies[i] < entropy_threshold)
      n = std::min<std::int64_t>(n, low_entropy_chunk_length);
    if (n == end - begin) {
      std::fill(keep.begin() + begin, keep.begin() + end, 1);
    } else {
      const auto chunk = token_scores.subspan(static_cast<std::size_t>(begin),
                                              static_cast<std::size_t>(end - begin));
      for (const auto j : torch_top_k_ranked(chunk, n))
        keep[static_cast<std::size_t>(begin + j)] = 1;
    }
    left -= n;
  }
  if (left > 0) {
    std::vector<std::int32_t> leftover;
    std::vector<float> leftover_scores;
    for (std::int64_t j = 0; j < L; ++j) {
      if (keep[static_cast<std::size_t>(j)]) continue;
      leftover.push_back(static_cast<std::int32_t>(j));
      leftover_scores.push_back(token_scores[static_cast<std::size_t>(j)]);
    }
    for (const auto k : torch_top_k_ranked(leftover_scores, left))
      keep[static_cast<std::size_t>(leftover[static_cast<std::size_t>(k)])] = 1;
  }
  std::vector<std::int32_t> kept;
  for (std::int64_t j = 0; j < L; ++j)
    if (keep[static_cast<std::size_t>(j)]) kept.push_back(static_cast<std::int32_t>(j));
  return kept;
}

EntropyGatedChunkKvMethod::EntropyGatedChunkKvMethod(std::shared_ptr<const Scorer> scorer,
                                                     int chunk_length, int low_entropy_chunk_length)
    : ScorerWrapperMethod("entropy_gated_chunkkv", std::move(scorer)),
      chunk_length_(chunk_length),
      low_entropy_chunk_length_(low_entropy_chunk_length) {
  if (!scorer_) throw std::invalid_argument("entropy_gated_chunkkv: null scorer");
  if (!(chunk_length > low_entropy_chunk_length && low_entropy_chunk_length >= 1))
    throw std::invalid_argument(
        "entropy_gated_chunkkv: needs chunk_length > low_entropy_chunk_length >= 1");
}

Selection EntropyGatedChunkKvMethod::select(std::span<const LayerCapture> layers,
                                            const Budget& budget,
                                            const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const std::int64_t n_kept = kept_count(L, budget.compression);
  Selection selection;
  for (const auto& layer : layers) {
    if (budget.compression == 0.0) {  // kvpress returns the cache unchanged
      std::vector<std::int32_t> all(static_cast<std::size_t>(L));
      std::iota(all.begin(), all.end(), 0);
      selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), all);
      continue;
    }
    const auto scores = score_layer(*scorer_, layer, budget, context);
    std::vector<float> token_scores(static_cast<std::size_t>(L));
    for (std::size_t j = 0; j < token_scores.size(); ++j) {
      float sum = 0.0f;
      for (std::size_t h = 0; h < static_cast<std::size_t>(layer.num_kv_heads); ++h)
        sum += scores[h * static_cast<std::size_t>(L) + j];
      token_scores[j] = maybe_bf16(sum, layer.model_is_bf16);
    }
    const auto kept = entropy_gated_chunk_selection(token_scores, n_kept, chunk_length_,
                                                    low_entropy_chunk_length_);
    selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), kept);
  }
  return selection;
}

}  // namespace kvaudit::methods
