// NonCausalAttentionScorer (non_causal_attention.h).
#include "methods/non_causal_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

constexpr std::size_t kBlock = 16;  // keys whose q·k are accumulated together

// kvpress fills the padded keys' logits with −1e-9 in the model dtype.
float padded_key_logit(bool bf16) { return maybe_bf16(-1e-9f, bf16); }

}  // namespace

void check_all_queries(const LayerCapture& layer, const std::string& method) {
  check_capture_basics(layer, method);
  const std::size_t rows = to_size(layer.length) * to_size(layer.head_dim);
  if (layer.queries.size() != to_size(layer.num_heads) * rows ||
      layer.queries_prerope.size() != to_size(layer.num_heads) * rows ||
      layer.keys_prerope.size() != to_size(layer.num_kv_heads) * rows) {
    throw std::invalid_argument(
        method + ": layer " + std::to_string(layer.layer) +
        " capture: queries / queries_prerope [H, L, d] and keys_prerope [Hkv, L, d] are missing "
        "or of the wrong size (the capture must be asked for all queries: "
        "Method::needs_all_queries)");
  }
}

std::vector<float> non_causal_attention_scores(const LayerCapture& layer, int first, int count,
                                               int chunk_size) {
  const std::size_t n = to_size(count);
  const std::size_t C = to_size(chunk_size);
  const std::size_t L = to_size(layer.length);
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t g = to_size(layer.group_size());
  const std::size_t kv_heads = to_size(layer.num_kv_heads);
  const bool bf16 = layer.model_is_bf16;
  const std::size_t chunks = (n + C - 1) / C;
  const float pad_logit = padded_key_logit(bf16);

  // attention[h][j]: Σ over the rows of j's chunk of softmax(q·k) (fp32 in kvpress).
  std::vector<float> attention(to_size(layer.num_heads) * n, 0.0f);
  std::vector<float> keys_t(d * C);  // the chunk's keys transposed, [d, C]
  std::vector<float> logits(C);
  std::vector<float> exps(C);
  std::vector<double> column(C);
  for (std::size_t h = 0; h < to_size(layer.num_heads); ++h) {
    const float* queries = layer.queries.data() + h * L * d;
    const float* keys = layer.keys[h / g].data();
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t begin = c * C;
      const std::size_t valid = std::min(C, n - begin);
      for (std::size_t t = 0; t < valid; ++t)
        for (std::size_t e = 0; e < d; ++e)
          keys_t[e * C + t] = keys[(to_size(first) + begin + t) * d + e];
      std::fill(column.begin(), column.end(), 0.0);
      for (std::size_t r = 0; r < C; ++r) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        if (r < valid) {
          // q·k in fp32, each dot accumulated over e in order (as the matmul), vectorised over t.
          const float* q = queries + (to_size(first) + begin + r) * d;
          std::size_t t0 = 0;
          for (; t0 + kBlock <= valid; t0 += kBlock) {  // fixed-width blocks: vectorised
            float block[kBlock] = {};
            for (std::size_t e = 0; e < d; ++e) {
              const float qe = q[e];
              const float* k_row = keys_t.data() + e * C + t0;
              for (std::size_t u = 0; u < kBlock; ++u) block[u] += qe * k_row[u];
            }
            std::copy_n(block, kBlock, logits.begin() + static_cast<std::ptrdiff_t>(t0));
          }
          for (std::size_t e = 0; e < d; ++e) {
            const float qe = q[e];
            const float* k_row = keys_t.data() + e * C;
            for (std::size_t t = t0; t < valid; ++t) logits[t] += qe * k_row[t];
          }
          for (std::size_t t = 0; t < valid; ++t) logits[t] = maybe_bf16(logits[t], bf16);
        }
        // A padded query row keeps logits 0; padded keys get −1e-9 in every row.
        for (std::size_t t = valid; t < C; ++t) logits[t] = pad_logit;
        const float top = *std::max_element(logits.begin(), logits.end());
        // fp32 exponentials (as torch's fp32 softmax), summed in double.
        for (std::size_t t = 0; t < C; ++t) exps[t] = std::exp(logits[t] - top);
        double total = 0.0;
        for (std::size_t t = 0; t < C; ++t) total += exps[t];
        for (std::size_t t = 0; t < valid; ++t)
          column[t] += static_cast<double>(static_cast<float>(exps[t] / total));
      }
      for (std::size_t t = 0; t < valid; ++t)
        attention[h * n + begin + t] = static_cast<float>(column[t]);
    }
  }

  std::vector<float> scores(kv_heads * n);
  for (std::size_t kv = 0; kv < kv_heads; ++kv) {
    const float* values = layer.values[kv].data();
    std::vector<float> weighted(n);
    for (std::size_t j = 0; j < n; ++j) {
      double mean = 0.0;
      for (std::size_t m = 0; m < g; ++m) mean += attention[(kv * g + m) * n + j];
      const float group_mean = static_cast<float>(mean / static_cast<double>(g));
      const float* v = values + (to_size(first) + j) * d;
      double sq = 0.0;
      for (std::size_t e = 0; e < d; ++e) sq += static_cast<double>(v[e]) * v[e];
      const float norm = maybe_bf16(static_cast<float>(std::sqrt(sq)), bf16);
      weighted[j] = group_mean * norm;
    }
    // avg_pool1d(kernel 3, padding 1, stride 1), the zero padding counted in the divisor.
    for (std::size_t j = 0; j < n; ++j) {
      double sum = weighted[j];
      if (j > 0) sum += weighted[j - 1];
      if (j + 1 < n) sum += weighted[j + 1];
      scores[kv * n + j] = static_cast<float>(sum / 3.0);
    }
  }
  return scores;
}

void z_normalize(std::vector<float>& scores) {
  if (scores.empty()) return;
  const auto count = static_cast<double>(scores.size());
  double mean = 0.0;
  for (const float s : scores) mean += s;
  mean /= count;
  double squares = 0.0;
  for (const float s : scores) squares += (s - mean) * (s - mean);
  const double std_dev = scores.size() > 1 ? std::sqrt(squares / (count - 1.0)) : 0.0;
  const double scale = std::max(static_cast<double>(static_cast<float>(std_dev)), 1e-6);
  for (float& s : scores) s = static_cast<float>((s - mean) / scale);
}

NonCausalAttentionScorer::NonCausalAttentionScorer(NonCausalAttentionParams params)
    : params_(params) {
  if (params_.chunk_size < 1)
    throw std::invalid_argument("non_causal_attention: chunk_size must be >= 1");
}

void NonCausalAttentionScorer::score(const LayerCapture& layer, const SelectionContext&,
                                     std::span<float> scores) const {
  check_all_queries(layer, name());
  std::vector<float> s = non_causal_attention_scores(layer, 0, layer.length, params_.chunk_size);
  z_normalize(s);
  std::copy(s.begin(), s.end(), scores.begin());
}

}  // namespace kvaudit::methods
