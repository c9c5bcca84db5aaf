// KvzipMethod (kvzip.h): the reconstruction pass's scores and the global / layer-wise selection.
#include "methods/kvzip.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <utility>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

// kvpress's prev_postfix_size: tokens of the previous chunk repeated in a later chunk's request.
constexpr std::size_t kPreviousChunkTail = 8;

std::size_t to_size(int value) { return static_cast<std::size_t>(value); }

// x·y over d elements, accumulated in double and returned as f32 (a BLAS dot product up to f32
// rounding).
float dot(const float* x, const float* y, int d) {
  double sum = 0.0;
  for (int i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return static_cast<float>(sum);
}

// ‖x‖₂ over n elements (torch.norm: f32 accumulation of the squares, here in double).
float l2_norm(const float* x, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return static_cast<float>(std::sqrt(sum));
}

// ‖W_O^{(h)} v‖₂: v [d] through query head h's columns of o_proj [D, H·d] (each output rounded
// like the model's matmul), then the norm.
float value_output_norm(const LayerCapture& layer, int head, const float* value, bool bf16) {
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t width = to_size(layer.num_heads) * d;
  double sum = 0.0;
  for (std::size_t row = 0; row < to_size(layer.hidden_size); ++row) {
    const float* w = layer.o_proj.data() + row * width + to_size(head) * d;
    const float out = maybe_bf16(dot(w, value, layer.head_dim), bf16);
    sum += static_cast<double>(out) * static_cast<double>(out);
  }
  return maybe_bf16(static_cast<float>(std::sqrt(sum)), bf16);
}

}  // namespace

KvzipMethod::KvzipMethod(KvzipParams params) : params_(params) {
  if (params_.n_sink < 0) throw std::invalid_argument("kvzip: n_sink must be >= 0");
  if (params_.chunk_size < 1) throw std::invalid_argument("kvzip: chunk_size must be >= 1");
}

std::string KvzipMethod::pass_key() const {
  return std::string("kvzip: reconstruction; normalisation=") +
         (params_.variant == KvzipVariant::kvzip_plus ? "plus" : "none") +
         "; n_sink=" + std::to_string(params_.n_sink) +
         "; chunk_size=" + std::to_string(params_.chunk_size);
}

std::vector<PassChunk> KvzipMethod::chunks(std::span<const std::int32_t> cached_tokens,
                                           const PassPrompt& prompt) const {
  const int length = static_cast<int>(cached_tokens.size());
  if (prompt.prefix_length < 0) throw std::invalid_argument("kvzip: negative prefix length");
  if (prompt.prefix_length >= length) return {};  // nothing to reconstruct
  if (prompt.repeat_first.empty() || prompt.suffix.empty()) {
    throw std::invalid_argument(
        "kvzip: the unit has no reconstruction prompt ids (UnitTokens::pass_prompt: the "
        "tokenizer's \"Repeat the previous context exactly.\" and chat template suffix)");
  }
  std::vector<PassChunk> out;
  for (int first = prompt.prefix_length; first < length; first += params_.chunk_size) {
    PassChunk chunk;
    chunk.first = first;
    chunk.end = std::min(length, first + params_.chunk_size);
    if (out.empty()) {
      chunk.tokens = prompt.repeat_first;
    } else {
      if (prompt.repeat_next.empty()) {
        throw std::invalid_argument(
            "kvzip: the context needs several chunks but the unit has no ids for \"Repeat the "
            "part of the previous context exactly, starting with\" (UnitTokens::pass_prompt)");
      }
      chunk.tokens = prompt.repeat_next;
      const PassChunk& previous = out.back();
      const std::size_t tail = std::min(kPreviousChunkTail, to_size(previous.end - previous.first));
      chunk.tokens.insert(chunk.tokens.end(),
                          cached_tokens.begin() + (previous.end - static_cast<int>(tail)),
                          cached_tokens.begin() + previous.end);
    }
    chunk.tokens.insert(chunk.tokens.end(), prompt.suffix.begin(), prompt.suffix.end());
    chunk.tokens.insert(chunk.tokens.end(), cached_tokens.begin() + chunk.first,
                        cached_tokens.begin() + chunk.end);
    out.push_back(std::move(chunk));
  }
  return out;
}

void KvzipMethod::observe(const LayerCapture& cached, const PassChunk& chunk,
                          const PassLayerView& rows, ExtraPassResult& result) const {
  const bool bf16 = cached.model_is_bf16;
  const bool plus = params_.variant == KvzipVariant::kvzip_plus;
  const int heads = cached.num_heads, kv_heads = cached.num_kv_heads, d = cached.head_dim;
  const int group = cached.group_size();
  const int rows_count = rows.num_tokens;
  const int sink = std::min(params_.n_sink, chunk.first);
  const int context = chunk.end - chunk.first;
  const int columns = sink + context + rows_count;
  if (chunk.first < 0 || chunk.end > cached.length || context < 0 ||
      rows.queries.size() != to_size(rows_count) * to_size(heads) * to_size(d) ||
      rows.keys.size() != to_size(rows_count) * to_size(kv_heads) * to_size(d) ||
      rows.values.size() != rows.keys.size() ||
      (plus && rows.attention_input.size() != to_size(rows_count) * to_size(cached.hidden_size))) {
    throw std::invalid_argument("kvzip: the reconstruction pass's rows of layer " +
                                std::to_string(cached.layer) + " do not match the capture");
  }
  if (plus && cached.o_proj.size() != to_size(cached.hidden_size) * to_size(heads) * to_size(d)) {
    throw std::invalid_argument("kvzip_plus: layer " + std::to_string(cached.layer) +
                                " has no o_proj of shape [hidden, heads·head_dim]");
  }
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(d)));

  // Column c of the subset: sink keys, the chunk's cached keys, the chunk's own keys.
  const auto key_row = [&](int kv_head, int c) -> const float* {
    if (c < sink) return cached.keys[to_size(kv_head)].data() + to_size(c) * to_size(d);
    if (c < sink + context) {
      return cached.keys[to_size(kv_head)].data() + to_size(chunk.first + c - sink) * to_size(d);
    }
    const int t = c - sink - context;
    return rows.keys.data() + (to_size(t) * to_size(kv_heads) + to_size(kv_head)) * to_size(d);
  };

  // KVzip+: 1/‖x_t‖ per row, ‖W_O^{(h)} v_j‖ per query head and chunk column.
  std::vector<float> inverse_norm;
  std::vector<float> value_norm;  // [H, context]
  if (plus) {
    const std::size_t hidden = to_size(cached.hidden_size);
    inverse_norm.resize(to_size(rows_count));
    for (int t = 0; t < rows_count; ++t) {
      const float norm =
          maybe_bf16(l2_norm(rows.attention_input.data() + to_size(t) * hidden, hidden), bf16);
      inverse_norm[to_size(t)] = maybe_bf16(1.0f / norm, bf16);
    }
    value_norm.resize(to_size(heads) * to_size(context));
#pragma omp parallel for schedule(static) if (heads > 1 && context > 64)
    for (int h = 0; h < heads; ++h) {
      const int g = h / group;
      for (int j = 0; j < context; ++j) {
        const float* v = cached.values[to_size(g)].data() + to_size(chunk.first + j) * to_size(d);
        value_norm[to_size(h) * to_size(context) + to_size(j)] =
            value_output_norm(cached, h, v, bf16);
      }
    }
  }

  // Per query head: the max over the chunk's rows of its weight on each chunk column (query heads
  // run in parallel, each writing only its own row of head_best).
  std::vector<float> head_best(to_size(heads) * to_size(context),
                               -std::numeric_limits<float>::infinity());
#pragma omp parallel for schedule(dynamic, 1) if (heads > 1 && rows_count * columns > 4096)
  for (int h = 0; h < heads; ++h) {
    const int g = h / group;
    std::vector<float> logits(to_size(columns));
    float* best = head_best.data() + to_size(h) * to_size(context);
    for (int t = 0; t < rows_count; ++t) {
      const float* q =
          rows.queries.data() + (to_size(t) * to_size(heads) + to_size(h)) * to_size(d);
      // Row t sees the sink and chunk columns and its own tokens up to itself.
      const int visible = sink + context + t + 1;
      float top = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < visible; ++c) {
        const float s = maybe_bf16(maybe_bf16(dot(q, key_row(g, c), d), bf16) / sqrt_d, bf16);
        logits[to_size(c)] = s;
        top = std::max(top, s);
      }
      double sum = 0.0;
      for (int c = 0; c < visible; ++c) {
        const float e = std::exp(logits[to_size(c)] - top);
        logits[to_size(c)] = e;
        sum += static_cast<double>(e);
      }
      const float inverse_sum = 1.0f / static_cast<float>(sum);
      for (int j = 0; j < context; ++j) {
        float a = maybe_bf16(logits[to_size(sink + j)] * inverse_sum, bf16);
        if (plus) {
          a = maybe_bf16(a * inverse_norm[to_size(t)], bf16);
          a = maybe_bf16(a * value_norm[to_size(h) * to_size(context) + to_size(j)], bf16);
        }
        best[j] = std::max(best[j], a);
      }
    }
  }
  // Max over the query heads of each KV group.
  for (int g = 0; g < kv_heads; ++g) {
    for (int j = 0; j < context; ++j) {
      float score = -std::numeric_limits<float>::infinity();
      for (int h = g * group; h < (g + 1) * group; ++h)
        score = std::max(score, head_best[to_size(h) * to_size(context) + to_size(j)]);
      result.at(cached.layer, g, chunk.first + j) = score;
    }
  }
}

Selection KvzipMethod::select_from_scores(const ExtraPassResult& pass, double compression,
                                          bool model_is_bf16) const {
  const int n_layers = pass.num_layers, kv_heads = pass.num_kv_heads, length = pass.length;
  const std::size_t per_layer = to_size(kv_heads) * to_size(length);
  Selection selection;
  selection.kept.assign(to_size(n_layers),
                        std::vector<std::vector<std::int32_t>>(to_size(kv_heads)));
  if (compression <= 0.0) {  // kvpress compresses only when compression_ratio > 0
    for (auto& layer : selection.kept) {
      for (auto& head : layer) {
        head.resize(to_size(length));
        for (int j = 0; j < length; ++j) head[to_size(j)] = j;
      }
    }
    return selection;
  }
  // Sinks: the maximum over every entry (sinks included) + 1, in the scores' dtype.
  std::vector<float> scores = pass.scores;
  float top = -std::numeric_limits<float>::infinity();
  for (const float s : scores) top = std::max(top, s);
  const float protected_score = maybe_bf16(top + 1.0f, model_is_bf16);
  const int sinks = std::min(params_.n_sink, length);
  for (int l = 0; l < n_layers; ++l)
    for (int g = 0; g < kv_heads; ++g)
      for (int j = 0; j < sinks; ++j)
        scores[(to_size(l) * to_size(kv_heads) + to_size(g)) * to_size(length) + to_size(j)] =
            protected_score;

  std::vector<float> negated(scores.size());
  std::transform(scores.begin(), scores.end(), negated.begin(), [](float s) { return -s; });
  std::vector<std::int64_t> pruned_per_layer(to_size(n_layers), 0);
  if (params_.layerwise) {
    // Python int(bsz·Hkv·ctx_len·cr): the integer product times a float, truncated.
    const auto n = static_cast<std::int64_t>(static_cast<double>(per_layer) * compression);
    std::fill(pruned_per_layer.begin(), pruned_per_layer.end(), n);
  } else {
    const auto n = static_cast<std::int64_t>(static_cast<double>(scores.size()) * compression);
    for (const std::int64_t flat : torch_top_k_ranked(negated, n))
      ++pruned_per_layer[static_cast<std::size_t>(flat) / per_layer];
  }
  for (int l = 0; l < n_layers; ++l) {
    const std::span<const float> layer_scores =
        std::span<const float>(negated).subspan(to_size(l) * per_layer, per_layer);
    std::vector<char> pruned(per_layer, 0);
    for (const std::int64_t flat : torch_top_k_ranked(layer_scores, pruned_per_layer[to_size(l)]))
      pruned[static_cast<std::size_t>(flat)] = 1;
    for (std::size_t i = 0; i < per_layer; ++i) {
      if (!pruned[i]) {
        selection.kept[to_size(l)][i / to_size(length)].push_back(
            static_cast<std::int32_t>(i % to_size(length)));
      }
    }
  }
  return selection;
}

Selection KvzipMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                              const SelectionContext& context) const {
  const int length = check_layers(layers, name());
  const ExtraPassResult* pass = context.extra_pass;
  if (pass == nullptr) {
    throw std::invalid_argument(name() +
                                ": no reconstruction-pass result (the unit runner runs the "
                                "method's extra pass before select)");
  }
  if (pass->num_layers != static_cast<int>(layers.size()) ||
      pass->num_kv_heads != layers.front().num_kv_heads || pass->length != length ||
      pass->scores.size() !=
          to_size(pass->num_layers) * to_size(pass->num_kv_heads) * to_size(pass->length)) {
    throw std::invalid_argument(name() + ": the reconstruction-pass result has another shape");
  }
  if (!(budget.compression >= 0.0 && budget.compression < 1.0)) {
    throw std::invalid_argument(name() + ": compression " + std::to_string(budget.compression) +
                                " is outside [0, 1)");
  }
  return select_from_scores(*pass, budget.compression, layers.front().model_is_bf16);
}

}  // namespace kvaudit::methods
