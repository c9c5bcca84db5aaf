// CapScorer (cap.h).
#include "methods/cap.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/non_causal_attention.h"

namespace kvaudit::methods {
namespace {

// Rounds a double to the model dtype (bf16 or f32), widened back.
double to_dtype(double x, bool bf16) {
  return static_cast<double>(maybe_bf16(static_cast<float>(x), bf16));
}

// R̄ [d, d] row-major in the model dtype: cos/sin per position rounded to the dtype (HF's rotary
// embedding casts them), the mean over the positions rounded once.
std::vector<double> averaged_rotation(std::span<const float> inv_freq, int length, int future,
                                      bool bf16) {
  const std::size_t half = inv_freq.size();
  const std::size_t d = 2 * half;
  std::vector<double> r(d * d, 0.0);
  for (int t = 0; t < future; ++t) {
    const auto p = static_cast<float>(length + t);
    for (std::size_t i = 0; i < half; ++i) {
      const float theta = p * inv_freq[i];  // HF: inv_freq @ position_ids in f32
      const double c = to_dtype(static_cast<float>(std::cos(static_cast<double>(theta))), bf16);
      const double s = to_dtype(static_cast<float>(std::sin(static_cast<double>(theta))), bf16);
      r[i * d + i] += c;
      r[(i + half) * d + (i + half)] += c;
      r[i * d + (i + half)] -= s;  // rotate_half: R[i, d/2+i] = −sin
      r[(i + half) * d + i] += s;  //              R[d/2+i, i] = +sin
    }
  }
  for (double& v : r) v = to_dtype(v / future, bf16);
  return r;
}

// F.normalize(x, dim=-1) in the model dtype: x / max(‖x‖, 1e-12), the norm rounded first.
std::vector<double> normalized(const double* x, std::size_t d, bool bf16) {
  double sq = 0.0;
  for (std::size_t e = 0; e < d; ++e) sq += x[e] * x[e];
  const double norm = std::max(to_dtype(std::sqrt(sq), bf16), 1e-12);
  std::vector<double> out(d);
  for (std::size_t e = 0; e < d; ++e) out[e] = to_dtype(x[e] / norm, bf16);
  return out;
}

// Solves the symmetric positive definite a [d, d] (Cholesky, in place) for each column of rhs
// [d, m] (in place). A = I + Σ uuᵀ is symmetric positive definite by construction.
void solve_spd(std::vector<double>& a, std::vector<double>& rhs, std::size_t d, std::size_t m) {
  for (std::size_t c = 0; c < d; ++c) {
    double diagonal = a[c * d + c];
    for (std::size_t t = 0; t < c; ++t) diagonal -= a[c * d + t] * a[c * d + t];
    if (!(diagonal > 0.0))
      throw std::invalid_argument("cap: capacity matrix is not positive definite");
    const double root = std::sqrt(diagonal);
    a[c * d + c] = root;
    for (std::size_t r = c + 1; r < d; ++r) {
      double v = a[r * d + c];
      for (std::size_t t = 0; t < c; ++t) v -= a[r * d + t] * a[c * d + t];
      a[r * d + c] = v / root;
    }
  }
  // Row-oriented substitutions over all m right-hand sides at once (vectorisable).
  for (std::size_t r = 0; r < d; ++r) {  // forward: F y = b
    double* row = rhs.data() + r * m;
    const double pivot = a[r * d + r];
    for (std::size_t col = 0; col < m; ++col) row[col] /= pivot;
    for (std::size_t t = r + 1; t < d; ++t) {
      const double f = a[t * d + r];
      double* target = rhs.data() + t * m;
      for (std::size_t col = 0; col < m; ++col) target[col] -= f * row[col];
    }
  }
  for (std::size_t r = d; r-- > 0;) {  // backward: Fᵀ x = y
    double* row = rhs.data() + r * m;
    const double pivot = a[r * d + r];
    for (std::size_t col = 0; col < m; ++col) row[col] /= pivot;
    for (std::size_t t = 0; t < r; ++t) {
      const double f = a[r * d + t];  // Fᵀ[t, r]
      double* target = rhs.data() + t * m;
      for (std::size_t col = 0; col < m; ++col) target[col] -= f * row[col];
    }
  }
}

}  // namespace

CapScorer::CapScorer(CapParams params) : params_(params) {
  if (!(params_.tau >= 0.0)) throw std::invalid_argument("cap: tau must be >= 0");
  if (params_.n_future_positions < 1)
    throw std::invalid_argument("cap: n_future_positions must be >= 1");
  if (params_.n_sink < 0) throw std::invalid_argument("cap: n_sink must be >= 0");
  if (!(params_.epsilon >= 0.0)) throw std::invalid_argument("cap: epsilon must be >= 0");
}

void CapScorer::score(const LayerCapture& layer, const SelectionContext&,
                      std::span<float> scores) const {
  check_all_queries(layer, name());
  if (layer.length <= params_.n_sink)
    throw std::invalid_argument("cap: L = " + std::to_string(layer.length) +
                                " must be larger than n_sink = " + std::to_string(params_.n_sink));
  if (layer.rope_inv_freq.size() != to_size(layer.head_dim / 2))
    throw std::invalid_argument("cap: layer " + std::to_string(layer.layer) +
                                " capture: rope_inv_freq must have head_dim/2 entries");
  const bool bf16 = layer.model_is_bf16;
  const std::size_t L = to_size(layer.length);
  const std::size_t d = to_size(layer.head_dim);
  const std::size_t sink = to_size(params_.n_sink);
  const std::size_t m = L - sink;  // scored positions
  const std::size_t g = to_size(layer.group_size());
  const std::vector<double> rotation =
      averaged_rotation(layer.rope_inv_freq, layer.length, params_.n_future_positions, bf16);

  std::vector<float> scores_kv(to_size(layer.num_kv_heads) * m, 0.0f);
  std::vector<double> rotated(d), anchor(d);
  for (std::size_t h = 0; h < to_size(layer.num_heads); ++h) {
    const std::size_t kv = h / g;
    const float* keys = layer.keys[kv].data();
    const float* values = layer.values[kv].data();
    // μ_h = mean over rows ≥ n_sink of R̄ q (each product rounded to the dtype, then the mean).
    std::fill(anchor.begin(), anchor.end(), 0.0);
    for (std::size_t i = sink; i < L; ++i) {
      const float* q = layer.queries_prerope.data() + (h * L + i) * d;
      for (std::size_t e = 0; e < d; ++e) {
        float acc = 0.0f;  // fp32 accumulation, as the matmul
        for (std::size_t c = 0; c < d; ++c) acc += q[c] * static_cast<float>(rotation[e * d + c]);
        anchor[e] += to_dtype(acc, bf16);
      }
    }
    for (double& a : anchor) a = to_dtype(a / static_cast<double>(m), bf16);
    const std::vector<double> unit_anchor = normalized(anchor.data(), d, bf16);

    // Weights w_j.
    std::vector<double> logits(m);
    double top = -std::numeric_limits<double>::infinity();
    std::vector<double> key(d);
    for (std::size_t j = 0; j < m; ++j) {
      for (std::size_t e = 0; e < d; ++e) key[e] = keys[(sink + j) * d + e];
      const std::vector<double> unit_key = normalized(key.data(), d, bf16);
      float dot = 0.0f;  // fp32 accumulation, as the einsum
      for (std::size_t e = 0; e < d; ++e)
        dot += static_cast<float>(unit_anchor[e]) * static_cast<float>(unit_key[e]);
      const double statistic = std::clamp(to_dtype(dot, bf16), -1.0, 1.0);
      logits[j] = to_dtype(static_cast<float>(params_.tau) * static_cast<float>(statistic), bf16);
      top = std::max(top, logits[j]);
    }
    std::vector<double> weights(m);
    for (std::size_t j = 0; j < m; ++j)
      weights[j] = to_dtype(std::exp(to_dtype(logits[j] - top, bf16)), bf16);

    // A_h = I + Σ_j u_j u_jᵀ, u_j = v_j √(w_j + ε), the sum and then I + sum rounded.
    std::vector<double> capacity(d * d, 0.0);
    std::vector<float> u(d);
    for (std::size_t j = 0; j < m; ++j) {
      const double root = to_dtype(
          std::sqrt(to_dtype(weights[j] + static_cast<double>(static_cast<float>(params_.epsilon)),
                             bf16)),
          bf16);
      for (std::size_t e = 0; e < d; ++e)
        u[e] = static_cast<float>(to_dtype(values[(sink + j) * d + e] * root, bf16));
      for (std::size_t a = 0; a < d; ++a) {
        const auto ua = static_cast<double>(u[a]);
        for (std::size_t b = 0; b <= a; ++b) capacity[a * d + b] += ua * static_cast<double>(u[b]);
      }
    }
    for (std::size_t a = 0; a < d; ++a)
      for (std::size_t b = 0; b < a; ++b) capacity[b * d + a] = capacity[a * d + b];
    for (std::size_t a = 0; a < d; ++a)
      for (std::size_t b = 0; b < d; ++b)
        capacity[a * d + b] =
            to_dtype(to_dtype(capacity[a * d + b], bf16) + (a == b ? 1.0 : 0.0), bf16);

    // s_h(j) = w_j · v_jᵀ A⁻¹ v_j.
    std::vector<double> solution(d * m);
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t e = 0; e < d; ++e) solution[e * m + j] = values[(sink + j) * d + e];
    solve_spd(capacity, solution, d, m);
    for (std::size_t j = 0; j < m; ++j) {
      double leverage = 0.0;
      for (std::size_t e = 0; e < d; ++e)
        leverage += static_cast<double>(values[(sink + j) * d + e]) * solution[e * m + j];
      const auto s = static_cast<float>(weights[j] * leverage);
      scores_kv[kv * m + j] += s;
    }
  }
  // Mean over the group, then the sinks at the layer max + 1.
  float top = -std::numeric_limits<float>::infinity();
  for (std::size_t kv = 0; kv < to_size(layer.num_kv_heads); ++kv) {
    for (std::size_t j = 0; j < m; ++j) {
      const float s = scores_kv[kv * m + j] / static_cast<float>(g);
      scores[kv * L + sink + j] = s;
      top = std::max(top, s);
    }
  }
  for (std::size_t kv = 0; kv < to_size(layer.num_kv_heads); ++kv)
    for (std::size_t j = 0; j < sink; ++j) scores[kv * L + j] = top + 1.0f;
}

}  // namespace kvaudit::methods
