// FinchMethod and FinchScorer (finch.h).
#include "methods/finch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"
#include "methods/window_attention.h"

namespace kvaudit::methods {

namespace {

void check_finch_params(const FinchParams& params) {
  if (params.window < 1) throw std::invalid_argument("finch: window must be >= 1");
  if (params.chunk_length < 0) throw std::invalid_argument("finch: chunk_length must be >= 0");
}

}  // namespace

int finch_window(const SelectionContext& context, int fallback_window) {
  if (context.question_tokens < 0)
    throw std::invalid_argument("finch: question_tokens is " +
                                std::to_string(context.question_tokens) + ", must be >= 0");
  return context.question_tokens > 0 ? context.question_tokens : fallback_window;
}

FinchScorer::FinchScorer(FinchParams params) : params_(params) { check_finch_params(params_); }

void FinchScorer::score(const LayerCapture& layer, const SelectionContext& context,
                        std::span<float> scores) const {
  const int w = finch_window(context, params_.window);
  check_window(layer, w, name());
  const auto L = static_cast<std::size_t>(layer.length);
  const auto window = static_cast<std::size_t>(w);
  const auto P = L - window;  // scored candidates 0..P-1
  const auto g = static_cast<std::size_t>(layer.group_size());
  const bool bf16 = layer.model_is_bf16;
  const auto attn = window_attention(layer, w);  // [H, w, L]

  std::vector<std::vector<float>> per_head(static_cast<std::size_t>(layer.num_heads));
  for (std::size_t h = 0; h < per_head.size(); ++h) {
    std::vector<float>& mean = per_head[h];
    mean.resize(P);
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t r = 0; r < window; ++r) {
        float weight = attn[(h * window + r) * L + j];
        // Row r is the query at position P + r; kvpress multiplies its weights by that position.
        if (params_.normalize_scores) weight = maybe_bf16(weight * static_cast<float>(P + r), bf16);
        sum += weight;
      }
      mean[j] = maybe_bf16(static_cast<float>(sum / static_cast<double>(window)), bf16);
    }
  }
  for (std::size_t kv = 0; kv < static_cast<std::size_t>(layer.num_kv_heads); ++kv) {
    for (std::size_t j = 0; j < P; ++j) {
      double sum = 0.0;
      for (std::size_t m = 0; m < g; ++m) sum += per_head[kv * g + m][j];
      scores[kv * L + j] = maybe_bf16(static_cast<float>(sum / static_cast<double>(g)), bf16);
    }
  }
  protect_with_max_plus_one(scores, layer.length, layer.length - w, layer.length);
  if (bf16)
    for (float& s : scores) s = round_to_bf16(s);
}

std::vector<std::vector<std::int32_t>> chunked_top_k(std::span<const float> scores,
                                                     int num_kv_heads, int length, int chunk_length,
                                                     double compression) {
  const int chunk = chunk_length > 0 ? chunk_length : length;
  std::vector<std::vector<std::int32_t>> kept(static_cast<std::size_t>(num_kv_heads));
  const auto L = static_cast<std::size_t>(length);
  for (std::size_t h = 0; h < kept.size(); ++h) {
    for (int begin = 0; begin < length; begin += chunk) {
      const int size = std::min(chunk, length - begin);
      const auto part =
          scores.subspan(h * L + static_cast<std::size_t>(begin), static_cast<std::size_t>(size));
      for (const std::int32_t j : torch_top_k_positions(part, kept_count(size, compression)))
        kept[h].push_back(begin + j);
    }
  }
  return kept;
}

FinchMethod::FinchMethod(FinchParams params)
    : params_(params), scorer_(std::make_shared<FinchScorer>(params)) {}

int FinchMethod::window_rows_needed(int question_tokens) const {
  return std::max(question_tokens, params_.window);
}

Selection FinchMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  const int w = finch_window(context, params_.window);
  // kvpress asserts chunk_length > window / (1 - cr): the window's max + 1 scores must fit.
  if (params_.chunk_length > 0 && budget.compression > 0.0 &&
      !(params_.chunk_length > static_cast<double>(w) / (1.0 - budget.compression)))
    throw std::invalid_argument("finch: chunk_length " + std::to_string(params_.chunk_length) +
                                " must exceed window / (1 - compression) = " + std::to_string(w) +
                                " / (1 - " + std::to_string(budget.compression) +
                                ") (kvpress FinchPress requires it)");
  Selection selection;
  for (const auto& layer : layers) {
    const auto scores = score_layer(*scorer_, layer, budget, context);
    selection.kept.push_back(
        chunked_top_k(scores, layer.num_kv_heads, L, params_.chunk_length, budget.compression));
  }
  return selection;
}

}  // namespace kvaudit::methods
