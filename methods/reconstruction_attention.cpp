// The reconstruction attention of KVzip and KVgrad; see reconstruction_attention.h.
#include "methods/reconstruction_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"

namespace kvaudit::methods {
namespace {

// out[c] = q·keys[c] for `count` key rows of d floats (row c at keys + c·stride): each product
// exact in double (24 + 24 significant bits), lane l of 8 summing the products i ≡ l (mod 8) in
// order, the lanes combined by a fixed tree, then rounded to f32 — a BLAS dot product up to f32
// rounding, and the same bits on every CPU (docs/design/numerics.md §Canonical evaluation order).
void dot_rows(const float* q, const float* keys, int count, int d, float* out, std::size_t stride) {
  constexpr int kLanes = 8;
  for (int c = 0; c < count; ++c) {
    const float* k = keys + to_size(c) * stride;
    double lanes[kLanes] = {};
    for (int i = 0; i < d; ++i) {
      lanes[i % kLanes] += static_cast<double>(q[i]) * static_cast<double>(k[i]);
    }
    const double s0 = (lanes[0] + lanes[4]) + (lanes[2] + lanes[6]);
    const double s1 = (lanes[1] + lanes[5]) + (lanes[3] + lanes[7]);
    out[c] = static_cast<float>(s0 + s1);
  }
}

// ‖W_O^{(h)} v‖₂: v [d] through query head h's columns of o_proj [D, H·d] (each output a dot_rows
// product, rounded like the model's matmul), then the norm.
float value_output_norm(const LayerCapture& layer, int head, const float* value, bool bf16,
                        std::vector<float>& outputs) {
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t width = to_size(layer.num_heads) * d;
  outputs.resize(to_size(layer.hidden_size));
  dot_rows(value, layer.o_proj.data() + to_size(head) * d, layer.hidden_size, layer.head_dim,
           outputs.data(), width);
  double sum = 0.0;
  for (const float product : outputs) {
    const float out = maybe_bf16(product, bf16);
    sum += static_cast<double>(out) * static_cast<double>(out);
  }
  return maybe_bf16(static_cast<float>(std::sqrt(sum)), bf16);
}

}  // namespace

float reconstruction_l2_norm(const float* x, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return static_cast<float>(std::sqrt(sum));
}

std::vector<float> chunk_value_output_norms(const LayerCapture& cached, const PassChunk& chunk,
                                            const std::string& method) {
  const int heads = cached.num_heads, d = cached.head_dim, group = cached.group_size();
  if (cached.o_proj.size() != to_size(cached.hidden_size) * to_size(heads) * to_size(d)) {
    throw std::invalid_argument(method + ": layer " + std::to_string(cached.layer) +
                                " has no o_proj of shape [hidden, heads·head_dim]");
  }
  const int context = chunk.end - chunk.first;
  if (chunk.first < 0 || chunk.end > cached.length || context < 0 ||
      cached.values.size() != to_size(cached.num_kv_heads)) {
    throw std::invalid_argument(method + ": the reconstruction chunk [" +
                                std::to_string(chunk.first) + ", " + std::to_string(chunk.end) +
                                ") does not fit layer " + std::to_string(cached.layer) +
                                "'s capture");
  }
  std::vector<float> norms(to_size(heads) * to_size(context));
#pragma omp parallel for schedule(static) if (heads > 1 && context > 64)
  for (int h = 0; h < heads; ++h) {
    const int g = h / group;
    std::vector<float> outputs;
    for (int j = 0; j < context; ++j) {
      const float* v = cached.values[to_size(g)].data() + to_size(chunk.first + j) * to_size(d);
      norms[to_size(h) * to_size(context) + to_size(j)] =
          value_output_norm(cached, h, v, cached.model_is_bf16, outputs);
    }
  }
  return norms;
}

void fold_reconstruction_attention(const LayerCapture& cached, const PassChunk& chunk,
                                   const PassLayerView& rows, int n_sink,
                                   const ReconstructionWeight& weight, const std::string& method,
                                   ExtraPassResult& result) {
  const bool bf16 = cached.model_is_bf16;
  const int heads = cached.num_heads, kv_heads = cached.num_kv_heads, d = cached.head_dim;
  const int group = cached.group_size();
  const int rows_count = rows.num_tokens;
  const int sink = std::min(n_sink, chunk.first);
  const int context = chunk.end - chunk.first;
  const int columns = sink + context + rows_count;
  if (chunk.first < 0 || chunk.end > cached.length || context < 0 ||
      rows.queries.size() != to_size(rows_count) * to_size(heads) * to_size(d) ||
      rows.keys.size() != to_size(rows_count) * to_size(kv_heads) * to_size(d) ||
      rows.values.size() != rows.keys.size()) {
    throw std::invalid_argument(method + ": the reconstruction pass's rows of layer " +
                                std::to_string(cached.layer) + " do not match the capture");
  }
  const float sqrt_d = static_cast<float>(std::sqrt(static_cast<double>(d)));

  // Per KV group, the subset's keys contiguous [columns, d]: sink keys, the chunk's cached keys,
  // the chunk's own keys.
  std::vector<std::vector<float>> subset(to_size(kv_heads));
  for (int g = 0; g < kv_heads; ++g) {
    std::vector<float>& k = subset[to_size(g)];
    k.resize(to_size(columns) * to_size(d));
    const float* cached_keys = cached.keys[to_size(g)].data();
    std::copy_n(cached_keys, to_size(sink) * to_size(d), k.begin());
    std::copy_n(cached_keys + to_size(chunk.first) * to_size(d), to_size(context) * to_size(d),
                k.begin() + static_cast<std::ptrdiff_t>(to_size(sink) * to_size(d)));
    for (int t = 0; t < rows_count; ++t) {
      std::copy_n(
          rows.keys.data() + (to_size(t) * to_size(kv_heads) + to_size(g)) * to_size(d), to_size(d),
          k.begin() + static_cast<std::ptrdiff_t>(to_size(sink + context + t) * to_size(d)));
    }
  }

  // Per query head: the max over the chunk's rows of its weight on each chunk column (query heads
  // run in parallel, each writing only its own row of head_best).
  std::vector<float> head_best(to_size(heads) * to_size(context),
                               -std::numeric_limits<float>::infinity());
#pragma omp parallel for schedule(dynamic, 1) if (heads > 1 && rows_count * columns > 4096)
  for (int h = 0; h < heads; ++h) {
    const float* keys = subset[to_size(h / group)].data();
    std::vector<float> logits(to_size(columns));
    float* best = head_best.data() + to_size(h) * to_size(context);
    for (int t = 0; t < rows_count; ++t) {
      const float* q =
          rows.queries.data() + (to_size(t) * to_size(heads) + to_size(h)) * to_size(d);
      // Row t sees the sink and chunk columns and its own tokens up to itself.
      const int visible = sink + context + t + 1;
      dot_rows(q, keys, visible, d, logits.data(), to_size(d));
      float top = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < visible; ++c) {
        const float s = maybe_bf16(maybe_bf16(logits[to_size(c)], bf16) / sqrt_d, bf16);
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
      const std::span<float> weights(logits.data() + sink, to_size(context));
      for (float& a : weights) a = maybe_bf16(a * inverse_sum, bf16);
      weight(h, t, weights);
      for (int j = 0; j < context; ++j) best[j] = std::max(best[j], weights[to_size(j)]);
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

}  // namespace kvaudit::methods
