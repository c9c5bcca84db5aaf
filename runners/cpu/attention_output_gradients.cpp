// The decoder's backward for KVgrad's objective; formulas in attention_output_gradients.h.
#include "runners/cpu/attention_output_gradients.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "base/size_cast.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/rms_norm.h"

namespace kvaudit::cpu {
namespace {

// c [rows, cols] = a [rows, inner] · b [inner, cols] (a gradient times a weight: linear() is the
// other orientation, x · Wᵀ), in gemm()'s order (outputs split over the OpenMP threads).
void times_weight(const std::vector<float>& a, int rows, int inner, const std::vector<float>& b,
                  int cols, std::vector<float>& c) {
  c.assign(to_size(rows) * to_size(cols), 0.0f);
  if (rows == 0 || cols == 0) return;
  gemm(false, false, rows, cols, inner, 1.0f, a.data(), inner, b.data(), cols, false, c.data(),
       cols);
}

// gx += ∂(w ⊙ x·r)/∂x applied to g, per row.
void rms_norm_backward_add(const std::vector<float>& x, int rows, int width,
                           const std::vector<float>& w, double eps, const std::vector<float>& g,
                           std::vector<float>& gx) {
  for (int t = 0; t < rows; ++t) {
    const std::size_t base = to_size(t) * to_size(width);
    double squares = 0.0, weighted = 0.0;
    for (int i = 0; i < width; ++i) {
      const double xi = x[base + to_size(i)];
      squares += xi * xi;
      weighted += static_cast<double>(w[to_size(i)]) * g[base + to_size(i)] * xi;
    }
    const double r = 1.0 / std::sqrt(squares / width + eps);
    const double correction = r * r * r * weighted / width;
    for (int i = 0; i < width; ++i) {
      const double wg = static_cast<double>(w[to_size(i)]) * g[base + to_size(i)];
      gx[base + to_size(i)] +=
          static_cast<float>(r * wg - static_cast<double>(x[base + to_size(i)]) * correction);
    }
  }
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The transpose of RoPE (out_i = x_i cos_i − x_{i+h} sin_i, out_{i+h} = x_{i+h} cos_{i+h} +
// x_i sin_{i+h}) applied in place to g [T, heads, d].
void rope_backward(std::vector<float>& g, int rows, int heads, int d, const std::vector<float>& cos,
                   const std::vector<float>& sin) {
  const int half = d / 2;
  for (int t = 0; t < rows; ++t) {
    const float* c = cos.data() + to_size(t) * to_size(d);
    const float* s = sin.data() + to_size(t) * to_size(d);
    for (int h = 0; h < heads; ++h) {
      float* x = g.data() + (to_size(t) * to_size(heads) + to_size(h)) * to_size(d);
      for (int i = 0; i < half; ++i) {
        const float lo = x[i], hi = x[i + half];
        x[i] = lo * c[i] + hi * s[i + half];
        x[i + half] = hi * c[i + half] - lo * s[i];
      }
    }
  }
}

// One query head's softmax attention backward (gemm(), linear.h): rows t = 0..T−1 with queries q
// [T, d] and output gradients go [T, d] attend over n entries (keys, values [n, d]; row t sees the
// first visible[t]); the last T entries are the rows' own. With S = scale·QKᵀ, P = softmax(S)
// (masked), ∂P = ∂O Vᵀ and ∂S = P ⊙ (∂P − rowsum(P ⊙ ∂P)): ∂Q += scale·∂S K, and for the rows' own
// entries ∂K += scale·∂Sᵀ Q, ∂V += Pᵀ ∂O. Leading dimensions: ldq for q, go and gq; ldkv for gk and
// gv.
void attention_head_backward(int T, int n, int d, float scale, const std::vector<int>& visible,
                             const float* q, int ldq, const float* go, int ldgo, const float* keys,
                             const float* values, float* gq, int ldgq, float* gk, float* gv,
                             int ldkv) {
  thread_local std::vector<float> p, gs;
  p.assign(to_size(T) * to_size(n), 0.0f);
  gs.assign(p.size(), 0.0f);
  gemm(false, true, T, n, d, scale, q, ldq, keys, d, false, p.data(), n);
  gemm(false, true, T, n, d, 1.0f, go, ldgo, values, d, false, gs.data(), n);
  for (int t = 0; t < T; ++t) {
    float* pr = p.data() + to_size(t) * to_size(n);
    float* gr = gs.data() + to_size(t) * to_size(n);
    const int seen = visible[to_size(t)];
    float top = -INFINITY;
    for (int j = 0; j < seen; ++j) top = std::max(top, pr[j]);
    double sum = 0.0;
    for (int j = 0; j < seen; ++j) sum += (pr[j] = std::exp(pr[j] - top));
    double delta = 0.0;
    for (int j = 0; j < seen; ++j) {
      pr[j] = static_cast<float>(pr[j] / sum);
      delta += static_cast<double>(pr[j]) * gr[j];
    }
    for (int j = 0; j < seen; ++j)
      gr[j] = static_cast<float>(static_cast<double>(pr[j]) * (gr[j] - delta) * scale);
    for (int j = seen; j < n; ++j) pr[j] = gr[j] = 0.0f;
  }
  const int first = n - T;
  gemm(false, false, T, d, n, 1.0f, gs.data(), n, keys, d, true, gq, ldgq);
  gemm(true, false, T, d, T, 1.0f, gs.data() + first, n, q, ldq, true, gk, ldkv);
  gemm(true, false, T, d, T, 1.0f, p.data() + first, n, go, ldgo, true, gv, ldkv);
}

double dot(const float* x, const float* y, int d) {
  double sum = 0.0;
  for (int i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * y[i];
  return sum;
}

}  // namespace

void GradientPassRecorder::on_layer(const PrefillLayerView& view) {
  if (view.layer != static_cast<int>(layers_.size())) {
    throw std::logic_error("GradientPassRecorder: layer " + std::to_string(view.layer) +
                           " out of order");
  }
  if (view.layer == 0) {
    positions_.assign(view.positions.begin(), view.positions.end());
    cos_.assign(view.rope_cos.begin(), view.rope_cos.end());
    sin_.assign(view.rope_sin.begin(), view.rope_sin.end());
  }
  GradientPassLayer& layer = layers_.emplace_back();
  layer.attention_input.assign(view.attention_input.begin(), view.attention_input.end());
  layer.queries.assign(view.queries.begin(), view.queries.end());
  layer.keys.assign(view.keys.begin(), view.keys.end());
  layer.values.assign(view.values.begin(), view.values.end());
}

void GradientPassRecorder::on_attention_residual(int layer, std::span<const float> before,
                                                 std::span<const float> after) {
  if (layer + 1 != static_cast<int>(layers_.size())) {
    throw std::logic_error("GradientPassRecorder: residual of layer " + std::to_string(layer) +
                           " out of order");
  }
  layers_.back().layer_input.assign(before.begin(), before.end());
  layers_.back().after_attention.assign(after.begin(), after.end());
}

std::vector<std::vector<float>> attention_output_gradient_norms(const model::ModelWeights& weights,
                                                                const GradientPassRecorder& record,
                                                                const KvCache& cache) {
  const model::ModelConfig& c = weights.config;
  const int T = record.num_tokens(), D = c.hidden_size, F = c.intermediate_size;
  const int H = c.num_heads, Hkv = c.num_kv_heads, d = c.head_dim;
  const int group = H / Hkv;
  const std::size_t hidden = to_size(D);
  if (static_cast<int>(record.layers().size()) != c.num_layers || T < 1 ||
      static_cast<int>(weights.layers.size()) != c.num_layers ||
      record.rope_cos().size() != to_size(T) * to_size(d) || cache.num_layers() != c.num_layers ||
      cache.num_kv_heads() != Hkv || cache.head_dim() != d) {
    throw std::invalid_argument(
        "attention_output_gradient_norms: the recorded forward does not match the model");
  }
  for (const GradientPassLayer& layer : record.layers()) {
    if (layer.layer_input.size() != to_size(T) * hidden ||
        layer.after_attention.size() != to_size(T) * hidden ||
        layer.queries.size() != to_size(T) * to_size(H) * to_size(d) ||
        layer.keys.size() != to_size(T) * to_size(Hkv) * to_size(d) ||
        layer.values.size() != layer.keys.size()) {
      throw std::invalid_argument(
          "attention_output_gradient_norms: a recorded layer has another shape");
    }
  }
  const double eps = c.rms_norm_eps;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<std::vector<float>> norms(to_size(c.num_layers), std::vector<float>(to_size(T)));

  std::vector<float> g;  // ∂Φ/∂h_{ℓ+1} [T, D]
  std::vector<float> normed, gate, up, product_out, g_mid, g_normed, g_tmp;
  for (int l = c.num_layers - 1; l >= 0; --l) {
    const model::LayerWeights& w = weights.layers[to_size(l)];
    const GradientPassLayer& act = record.layers()[to_size(l)];

    // MLP forward again from a_ℓ (m, gate, up); the last layer also needs h_L for ∂Φ/∂h_L = 2h_L.
    normed.resize(to_size(T) * hidden);
    gate.resize(to_size(T) * to_size(F));
    up.resize(gate.size());
    rms_norm(act.after_attention, w.post_attention_norm, D, static_cast<float>(eps), Rounding::none,
             normed);
    linear(normed, T, D, w.gate_proj, F, {}, Rounding::none, gate);
    linear(normed, T, D, w.up_proj, F, {}, Rounding::none, up);
    if (l == c.num_layers - 1) {
      std::vector<float> mlp(to_size(T) * to_size(F));
      for (std::size_t i = 0; i < mlp.size(); ++i) {
        const double z = gate[i];
        mlp[i] = static_cast<float>(z * sigmoid(z) * up[i]);
      }
      product_out.resize(to_size(T) * hidden);
      linear(mlp, T, F, w.down_proj, D, {}, Rounding::none, product_out);
      g.resize(to_size(T) * hidden);
      for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = 2.0f * (act.after_attention[i] + product_out[i]);
    }
    // ∂/∂(silu(gate)·up) = g · W_down; then through silu·mul and the two projections.
    times_weight(g, T, D, w.down_proj, F, g_mid);
    g_tmp.resize(g_mid.size());
    for (std::size_t i = 0; i < g_mid.size(); ++i) {
      const double z = gate[i], s = sigmoid(z);
      const double gm = g_mid[i];
      g_tmp[i] = static_cast<float>(gm * z * s);                              // ∂up
      g_mid[i] = static_cast<float>(gm * up[i] * s * (1.0 + z * (1.0 - s)));  // ∂gate
    }
    times_weight(g_mid, T, F, w.gate_proj, D, g_normed);
    times_weight(g_tmp, T, F, w.up_proj, D, product_out);
    for (std::size_t i = 0; i < g_normed.size(); ++i) g_normed[i] += product_out[i];
    // ∂Φ/∂a_ℓ = g + RMSNorm'ᵀ(∂m).
    std::vector<float> g_a = g;
    rms_norm_backward_add(act.after_attention, T, D, w.post_attention_norm, eps, g_normed, g_a);
    for (int t = 0; t < T; ++t) {
      norms[to_size(l)][to_size(t)] = static_cast<float>(
          std::sqrt(dot(g_a.data() + to_size(t) * hidden, g_a.data() + to_size(t) * hidden, D)));
    }
    if (l == 0) break;  // nothing below layer 0 is needed

    // Attention block: ∂o = ∂a · W_O, then per KV group the softmax attention's backward.
    std::vector<float> g_o;
    times_weight(g_a, T, D, w.o_proj, H * d, g_o);
    std::vector<float> g_q(to_size(T) * to_size(H) * to_size(d), 0.0f);
    std::vector<float> g_k(to_size(T) * to_size(Hkv) * to_size(d), 0.0f);
    std::vector<float> g_v(g_k.size(), 0.0f);
    const std::vector<std::int32_t>& positions = record.positions();
    // Per KV head: its cache view and each row's visible count (the rows' own entries must be
    // the head's last T: the forward appended them).
    std::vector<KvHeadView> heads(to_size(Hkv));
    std::vector<std::vector<int>> visible(to_size(Hkv), std::vector<int>(to_size(T)));
    for (int kv = 0; kv < Hkv; ++kv) {
      const KvHeadView& head = heads[to_size(kv)] = cache.head(l, kv);
      const std::size_t n = head.size();
      bool rows_at_end = n >= to_size(T);
      for (int t = 0; rows_at_end && t < T; ++t)
        rows_at_end = head.positions[n - to_size(T) + to_size(t)] == positions[to_size(t)];
      if (!rows_at_end) {
        throw std::invalid_argument("attention_output_gradient_norms: layer " + std::to_string(l) +
                                    " KV head " + std::to_string(kv) +
                                    " does not end with the rows' entries");
      }
      for (int t = 0; t < T; ++t) {
        visible[to_size(kv)][to_size(t)] = static_cast<int>(
            std::upper_bound(head.positions.begin(), head.positions.end(), positions[to_size(t)]) -
            head.positions.begin());
      }
    }
    // Query heads in parallel; each adds its ∂K, ∂V contributions to a buffer of its own
    // ([H][T, d]), summed per KV group afterwards.
    const std::size_t per_head = to_size(T) * to_size(d);
    std::vector<float> gk_heads(to_size(H) * per_head, 0.0f), gv_heads(gk_heads.size(), 0.0f);
    const int qs = H * d;
#pragma omp parallel for schedule(dynamic, 1) if (H > 1)
    for (int hq = 0; hq < H; ++hq) {
      const int kv = hq / group;
      const KvHeadView& head = heads[to_size(kv)];
      const std::size_t hq_offset = to_size(hq) * to_size(d);
      attention_head_backward(T, static_cast<int>(head.size()), d, static_cast<float>(scale),
                              visible[to_size(kv)], act.queries.data() + hq_offset, qs,
                              g_o.data() + hq_offset, qs, head.keys.data(), head.values.data(),
                              g_q.data() + hq_offset, qs, gk_heads.data() + to_size(hq) * per_head,
                              gv_heads.data() + to_size(hq) * per_head, d);
    }
    for (int hq = 0; hq < H; ++hq) {
      const int kv = hq / group;
      for (int t = 0; t < T; ++t) {
        const float* gk = gk_heads.data() + to_size(hq) * per_head + to_size(t) * to_size(d);
        const float* gv = gv_heads.data() + to_size(hq) * per_head + to_size(t) * to_size(d);
        float* k = g_k.data() + (to_size(t) * to_size(Hkv) + to_size(kv)) * to_size(d);
        float* v = g_v.data() + (to_size(t) * to_size(Hkv) + to_size(kv)) * to_size(d);
        for (int i = 0; i < d; ++i) {
          k[i] += gk[i];
          v[i] += gv[i];
        }
      }
    }
    rope_backward(g_q, T, H, d, record.rope_cos(), record.rope_sin());
    rope_backward(g_k, T, Hkv, d, record.rope_cos(), record.rope_sin());
    // ∂n_ℓ = ∂q W_Q + ∂k W_K + ∂v W_V; ∂h_ℓ = ∂a_ℓ + RMSNorm'ᵀ(∂n_ℓ).
    times_weight(g_q, T, H * d, w.q_proj, D, g_normed);
    times_weight(g_k, T, Hkv * d, w.k_proj, D, product_out);
    for (std::size_t i = 0; i < g_normed.size(); ++i) g_normed[i] += product_out[i];
    times_weight(g_v, T, Hkv * d, w.v_proj, D, product_out);
    for (std::size_t i = 0; i < g_normed.size(); ++i) g_normed[i] += product_out[i];
    g = std::move(g_a);
    rms_norm_backward_add(act.layer_input, T, D, w.input_norm, eps, g_normed, g);
  }
  return norms;
}

}  // namespace kvaudit::cpu
