// ThinkMethod (think.h).
#include "methods/think.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/capture_subset.h"
#include "methods/top_k.h"
#include "methods/wrapper_budgets.h"

namespace kvaudit::methods {
namespace {

[[noreturn]] void fail_think(const std::string& what) {
  throw std::invalid_argument("think: " + what);
}

// torch's mean of (already rounded) values: one f32-accumulated sum divided by the count, rounded
// once to the tensor's dtype (bf16 or f32); accumulated here in double.
float mean_of(double sum, std::size_t count, bool bf16) {
  return maybe_bf16(static_cast<float>(sum / static_cast<double>(count)), bf16);
}

}  // namespace

std::vector<float> think_channel_scores(const LayerCapture& layer, int window_size,
                                        const std::vector<std::vector<std::int32_t>>* kept) {
  check_capture_basics(layer, "think");
  if (window_size < 1) fail_think("window_size must be >= 1");
  const int rows = std::min(window_size, layer.length);
  if (layer.window_rows < rows || layer.window_rows > layer.length ||
      layer.window_queries.size() !=
          to_size(layer.num_heads) * to_size(layer.window_rows) * to_size(layer.head_dim))
    fail_think("layer " + std::to_string(layer.layer) +
               " capture: " + std::to_string(layer.window_rows) +
               " window query rows, the method reads the last " + std::to_string(rows));
  if (kept != nullptr && kept->size() != to_size(layer.num_kv_heads))
    fail_think("kept sets must list one head per KV head");
  const bool bf16 = layer.model_is_bf16;
  const std::size_t d = to_size(layer.head_dim);
  const int group = layer.group_size();

  // q̄ per query head: mean over the last `rows` window rows of the rounded squares.
  std::vector<float> query_energy(to_size(layer.num_heads) * d);
  for (int h = 0; h < layer.num_heads; ++h) {
    for (std::size_t c = 0; c < d; ++c) {
      double sum = 0;
      for (int r = layer.window_rows - rows; r < layer.window_rows; ++r) {
        const float q =
            layer.window_queries[(to_size(h) * to_size(layer.window_rows) + to_size(r)) * d + c];
        sum += maybe_bf16(q * q, bf16);
      }
      query_energy[to_size(h) * d + c] = mean_of(sum, to_size(rows), bf16);
    }
  }

  std::vector<float> scores(to_size(layer.num_kv_heads) * d);
  for (int g = 0; g < layer.num_kv_heads; ++g) {
    const auto keys = layer.keys[to_size(g)];
    const std::vector<std::int32_t>* positions = kept != nullptr ? &(*kept)[to_size(g)] : nullptr;
    if (positions != nullptr && positions->empty()) fail_think("a KV head keeps no position");
    const std::size_t count = positions != nullptr ? positions->size() : to_size(layer.length);
    for (std::size_t c = 0; c < d; ++c) {
      // q̄_g: the mean over the group's query heads of their (rounded) means.
      double query_sum = 0;
      for (int i = 0; i < group; ++i) query_sum += query_energy[(to_size(g * group + i)) * d + c];
      const float query_mean = mean_of(query_sum, to_size(group), bf16);
      double key_sum = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const std::int32_t j =
            positions != nullptr ? (*positions)[i] : static_cast<std::int32_t>(i);
        if (j < 0 || j >= layer.length) fail_think("kept position out of [0, L)");
        const float k = keys[static_cast<std::size_t>(j) * d + c];
        key_sum += maybe_bf16(k * k, bf16);
      }
      const float key_mean = mean_of(key_sum, count, bf16);
      scores[to_size(g) * d + c] = maybe_bf16(query_mean * key_mean, bf16);
    }
  }
  return scores;
}

std::vector<std::int32_t> lowest_channels(std::span<const float> head_scores, std::int64_t n) {
  // topk(largest=False) is topk(largest=True) of the negated scores, comparator and tie order
  // included (ATen TopKImpl.h uses x < y, resp. x > y, in the same algorithms).
  std::vector<float> negated(head_scores.begin(), head_scores.end());
  for (auto& s : negated) s = -s;
  return torch_top_k_positions(negated, n);
}

ThinkMethod::ThinkMethod(ThinkParams params) : params_(params) {
  if (!(params_.key_channel_compression_ratio >= 0.0 &&
        params_.key_channel_compression_ratio < 1.0))
    fail_think("key_channel_compression_ratio must be in [0, 1)");
  if (params_.window_size < 1) fail_think("window_size must be >= 1");
}

std::int64_t ThinkMethod::pruned_channel_count(int head_dim) const {
  return static_cast<std::int64_t>(static_cast<double>(head_dim) *
                                   params_.key_channel_compression_ratio);
}

std::vector<std::vector<std::int32_t>> ThinkMethod::zeroed_channels(
    const LayerCapture& layer, const std::vector<std::vector<std::int32_t>>* kept) const {
  std::vector<std::vector<std::int32_t>> zeroed(to_size(layer.num_kv_heads));
  const std::int64_t n = pruned_channel_count(layer.head_dim);
  if (n == 0) return zeroed;
  const auto scores = think_channel_scores(layer, params_.window_size, kept);
  const std::size_t d = to_size(layer.head_dim);
  for (std::size_t g = 0; g < zeroed.size(); ++g)
    zeroed[g] = lowest_channels(std::span<const float>(scores).subspan(g * d, d), n);
  return zeroed;
}

Selection ThinkMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  (void)context;
  const int L = check_layers(layers, name());
  if (std::abs(budget.compression - reported_compression()) > kFixedCompressionTolerance) {
    std::ostringstream message;
    message.precision(17);
    message << "think: key_channel_compression_ratio " << params_.key_channel_compression_ratio
            << " fixes the compression ratio at " << reported_compression()
            << " (kvpress reports key_channel_compression_ratio / 2: keys are half the cache); a "
               "cell asked for "
            << budget.compression;
    throw std::invalid_argument(message.str());
  }
  Selection selection;
  bool any = false;
  for (const auto& layer : layers) {
    selection.kept.push_back(position_range(layer, 0, L));
    selection.zeroed_key_channels.push_back(zeroed_channels(layer, nullptr));
    for (const auto& head : selection.zeroed_key_channels.back()) any = any || !head.empty();
  }
  if (!any) selection.zeroed_key_channels.clear();  // nothing pruned: no cache edit
  return selection;
}

}  // namespace kvaudit::methods
