// Naive double-precision decoder forward (the tests' oracle); see reference_forward.h.
#include "tests/cpu_runtime/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

namespace kvaudit::cpu::testing {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

Matrix linear(const Matrix& x, const std::vector<float>& w, const std::vector<float>& bias,
              std::size_t out) {
  const std::size_t in = x.front().size();
  Matrix y(x.size(), std::vector<double>(out, 0.0));
  for (std::size_t r = 0; r < x.size(); ++r) {
    for (std::size_t o = 0; o < out; ++o) {
      double sum = bias.empty() ? 0.0 : bias[o];
      for (std::size_t i = 0; i < in; ++i) sum += x[r][i] * w[o * in + i];
      y[r][o] = sum;
    }
  }
  return y;
}

Matrix rms_norm(const Matrix& x, const std::vector<float>& weight, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double ss = 0.0;
    for (double v : row) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(row.size()) + eps);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = row[i] * inv * weight[i];
  }
  return y;
}

// Rotate-half RoPE of every head of every row, position = row index.
void rope(Matrix& x, int heads, int head_dim, const std::vector<double>& inv_freq) {
  const std::size_t half = static_cast<std::size_t>(head_dim / 2);
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (int h = 0; h < heads; ++h) {
      double* v = x[t].data() + static_cast<std::size_t>(h * head_dim);
      for (std::size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(t) * inv_freq[i];
        const double a = v[i];
        const double b = v[i + half];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace

std::vector<double> reference_inv_freq(const model::RopeConfig& rope_config, int head_dim) {
  std::vector<double> inv(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv.size(); ++i) {
    inv[i] = 1.0 / std::pow(rope_config.theta, 2.0 * static_cast<double>(i) / head_dim);
  }
  if (rope_config.scaling == model::RopeScalingType::llama3) {
    const double old_len = static_cast<double>(rope_config.original_max_position_embeddings);
    const double low_wavelen = old_len / rope_config.low_freq_factor;
    const double high_wavelen = old_len / rope_config.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;  // high frequency: unchanged
      if (wavelen > low_wavelen) {           // low frequency: divided by factor
        f /= rope_config.factor;
        continue;
      }
      const double smooth = (old_len / wavelen - rope_config.low_freq_factor) /
                            (rope_config.high_freq_factor - rope_config.low_freq_factor);
      f = (1.0 - smooth) * f / rope_config.factor + smooth * f;
    }
  }
  return inv;
}

std::vector<std::vector<double>> reference_logits(const model::ModelWeights& weights,
                                                  std::span<const std::int32_t> tokens,
                                                  const KeyFilter& filter) {
  const model::ModelConfig& c = weights.config;
  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t d = static_cast<std::size_t>(c.head_dim);
  const std::size_t T = tokens.size();
  const int group = c.num_heads / c.num_kv_heads;
  const std::vector<double> inv_freq = reference_inv_freq(c.rope, c.head_dim);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

  Matrix x(T, std::vector<double>(hidden));
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t i = 0; i < hidden; ++i) {
      x[t][i] = weights.embed_tokens[static_cast<std::size_t>(tokens[t]) * hidden + i];
    }
  }
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const model::LayerWeights& w = weights.layers[static_cast<std::size_t>(layer)];
    const Matrix h = rms_norm(x, w.input_norm, c.rms_norm_eps);
    Matrix q = linear(h, w.q_proj, w.q_bias, static_cast<std::size_t>(c.num_heads) * d);
    Matrix k = linear(h, w.k_proj, w.k_bias, static_cast<std::size_t>(c.num_kv_heads) * d);
    const Matrix v = linear(h, w.v_proj, w.v_bias, static_cast<std::size_t>(c.num_kv_heads) * d);
    rope(q, c.num_heads, c.head_dim, inv_freq);
    rope(k, c.num_kv_heads, c.head_dim, inv_freq);
    Matrix attn(T, std::vector<double>(static_cast<std::size_t>(c.num_heads) * d, 0.0));
    for (std::size_t t = 0; t < T; ++t) {
      for (int head = 0; head < c.num_heads; ++head) {
        const int kv = head / group;
        std::vector<double> scores;
        std::vector<std::size_t> keys;
        for (std::size_t j = 0; j <= t; ++j) {
          if (filter && !filter(layer, kv, static_cast<int>(t), static_cast<int>(j))) continue;
          double s = 0.0;
          for (std::size_t e = 0; e < d; ++e) {
            s += q[t][static_cast<std::size_t>(head) * d + e] *
                 k[j][static_cast<std::size_t>(kv) * d + e];
          }
          scores.push_back(s * scale);
          keys.push_back(j);
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0.0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (std::size_t n = 0; n < keys.size(); ++n) {
          for (std::size_t e = 0; e < d; ++e) {
            attn[t][static_cast<std::size_t>(head) * d + e] +=
                scores[n] / sum * v[keys[n]][static_cast<std::size_t>(kv) * d + e];
          }
        }
      }
    }
    const Matrix o = linear(attn, w.o_proj, {}, hidden);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t i = 0; i < hidden; ++i) x[t][i] += o[t][i];
    const Matrix h2 = rms_norm(x, w.post_attention_norm, c.rms_norm_eps);
    const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
    Matrix g = linear(h2, w.gate_proj, {}, inter);
    const Matrix u = linear(h2, w.up_proj, {}, inter);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t i = 0; i < inter; ++i)
        g[t][i] = g[t][i] / (1.0 + std::exp(-g[t][i])) * u[t][i];
    const Matrix down = linear(g, w.down_proj, {}, hidden);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t i = 0; i < hidden; ++i) x[t][i] += down[t][i];
  }
  const Matrix final_h = rms_norm(x, weights.final_norm, c.rms_norm_eps);
  return linear(final_h, weights.output_projection(), {}, static_cast<std::size_t>(c.vocab_size));
}

}  // namespace kvaudit::cpu::testing
