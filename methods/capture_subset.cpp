// CaptureSubset (capture_subset.h).
#include "methods/capture_subset.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace kvaudit::methods {

CaptureSubset::CaptureSubset(const LayerCapture& layer,
                             std::vector<std::vector<std::int32_t>> positions)
    : positions_(std::move(positions)) {
  if (positions_.size() != static_cast<std::size_t>(layer.num_kv_heads))
    throw std::invalid_argument("CaptureSubset: one position list per KV head expected");
  const std::size_t count = positions_.empty() ? 0 : positions_.front().size();
  const auto d = static_cast<std::size_t>(layer.head_dim);
  for (std::size_t h = 0; h < positions_.size(); ++h) {
    if (positions_[h].size() != count)
      throw std::invalid_argument("CaptureSubset: every KV head must keep the same count");
    std::vector<float> keys(count * d);
    std::vector<float> values(count * d);
    for (std::size_t i = 0; i < count; ++i) {
      const auto p = positions_[h][i];
      if (p < 0 || p >= layer.length)
        throw std::invalid_argument("CaptureSubset: position " + std::to_string(p) +
                                    " outside [0, " + std::to_string(layer.length) + ")");
      const auto source = static_cast<std::size_t>(p) * d;
      std::copy_n(layer.keys[h].data() + source, d, keys.data() + i * d);
      std::copy_n(layer.values[h].data() + source, d, values.data() + i * d);
    }
    keys_.push_back(std::move(keys));
    values_.push_back(std::move(values));
  }
  view_ = layer;
  view_.length = static_cast<int>(count);
  view_.keys.clear();
  view_.values.clear();
  for (std::size_t h = 0; h < positions_.size(); ++h) {
    view_.keys.emplace_back(keys_[h]);
    view_.values.emplace_back(values_[h]);
  }
  view_.column_sums = {};
  view_.queries = {};
  view_.queries_prerope = {};
  view_.attention_input = {};
  // The window rows are the last rows of the full prefill; a subset shorter than them keeps the
  // last `count` (LayerCapture: window_rows ≤ L).
  if (view_.window_rows > view_.length) {
    const auto rows = static_cast<std::size_t>(view_.window_rows);
    const auto heads = static_cast<std::size_t>(layer.num_heads);
    const auto drop = rows - count;
    window_queries_.resize(heads * count * d);
    for (std::size_t h = 0; h < heads; ++h)
      std::copy_n(layer.window_queries.data() + (h * rows + drop) * d, count * d,
                  window_queries_.data() + h * count * d);
    view_.window_rows = static_cast<int>(count);
    view_.window_queries = window_queries_;
  }
}

bool reads_only_subset_fields(const Scorer& scorer) {
  return !scorer.needs_column_sums() && !scorer.needs_query_moments() &&
         !scorer.needs_all_queries() && !scorer.needs_attention_input();
}

std::vector<std::vector<std::int32_t>> position_range(const LayerCapture& layer, std::int32_t begin,
                                                      std::int32_t end) {
  std::vector<std::int32_t> range(static_cast<std::size_t>(end - begin));
  std::iota(range.begin(), range.end(), begin);
  return std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(layer.num_kv_heads),
                                                range);
}

}  // namespace kvaudit::methods
