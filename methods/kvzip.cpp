// KvzipMethod (kvzip.h): the reconstruction pass's scores and the global / layer-wise selection.
#include "methods/kvzip.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/reconstruction_attention.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

// kvpress's prev_postfix_size: tokens of the previous chunk repeated in a later chunk's request.
constexpr std::size_t kPreviousChunkTail = 8;

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
  const bool plus = params_.variant == KvzipVariant::kvzip_plus;
  if (!plus) {
    fold_reconstruction_attention(
        cached, chunk, rows, params_.n_sink, [](int, int, std::span<float>) {}, name(), result);
    return;
  }
  // KVzip+: a / ‖x_t‖ · ‖W_O^{(h)} v_j‖, each product rounded as kvpress's bf16 tensors are.
  const bool bf16 = cached.model_is_bf16;
  const std::size_t hidden = to_size(cached.hidden_size);
  if (rows.attention_input.size() != to_size(rows.num_tokens) * hidden) {
    throw std::invalid_argument(name() + ": the reconstruction pass's rows of layer " +
                                std::to_string(cached.layer) + " do not match the capture");
  }
  std::vector<float> inverse_norm(to_size(rows.num_tokens));
  for (int t = 0; t < rows.num_tokens; ++t) {
    const float norm = maybe_bf16(
        reconstruction_l2_norm(rows.attention_input.data() + to_size(t) * hidden, hidden), bf16);
    inverse_norm[to_size(t)] = maybe_bf16(1.0f / norm, bf16);
  }
  const int context = chunk.end - chunk.first;
  const std::vector<float> value_norm = chunk_value_output_norms(cached, chunk, name());
  fold_reconstruction_attention(
      cached, chunk, rows, params_.n_sink,
      [&](int h, int t, std::span<float> a) {
        const float* norms = value_norm.data() + to_size(h) * to_size(context);
        for (std::size_t j = 0; j < a.size(); ++j) {
          const float x = maybe_bf16(a[j] * inverse_norm[to_size(t)], bf16);
          a[j] = maybe_bf16(x * norms[j], bf16);
        }
      },
      name(), result);
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
  return select_named(layers, budget, context, name());
}

Selection KvzipMethod::select_named(std::span<const LayerCapture> layers, const Budget& budget,
                                    const SelectionContext& context, const std::string& method,
                                    bool allow_full_compression) const {
  const int length = check_layers(layers, method);
  const ExtraPassResult* pass = context.extra_pass;
  if (pass == nullptr) {
    throw std::invalid_argument(method +
                                ": no reconstruction-pass result (the unit runner runs the "
                                "method's extra pass before select)");
  }
  if (pass->num_layers != static_cast<int>(layers.size()) ||
      pass->num_kv_heads != layers.front().num_kv_heads || pass->length != length ||
      pass->scores.size() !=
          to_size(pass->num_layers) * to_size(pass->num_kv_heads) * to_size(pass->length)) {
    throw std::invalid_argument(method + ": the reconstruction-pass result has another shape");
  }
  if (!(budget.compression >= 0.0 &&
        (budget.compression < 1.0 || (allow_full_compression && budget.compression == 1.0)))) {
    throw std::invalid_argument(method + ": compression " + std::to_string(budget.compression) +
                                " is outside [0, 1)");
  }
  return select_from_scores(*pass, budget.compression, layers.front().model_is_bf16);
}

}  // namespace kvaudit::methods
