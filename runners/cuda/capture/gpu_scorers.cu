// GPU scorers (gpu_scorers.h). Each kernel is written beside the CPU loop it mirrors; compiled with
// -fmad=false so every fp64/f32 multiply and add rounds separately, as in the CPU code (built with
// -ffp-contract=off semantics on x86-64 baseline).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "runners/cuda/capture/gpu_scorers.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"

namespace kvaudit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;

__host__ __device__ constexpr std::size_t sz(int n) { return static_cast<std::size_t>(n); }

// Query heads per KV head (DeviceLayerCapture::group_size is host-only).
__device__ __forceinline__ int group_of(const DeviceLayerCapture& c) {
  return c.num_heads / c.num_kv_heads;
}

unsigned blocks_for(std::size_t total) {
  const std::size_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks > 1u << 20 ? 1u << 20 : blocks));
}

#define KVAUDIT_GRID_STRIDE(idx, total)                                                   \
  for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; \
       idx < (total); idx += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float maybe_bf16(float x, bool bf16) { return bf16 ? round_bf16(x) : x; }

__device__ __forceinline__ const float* key_row(const DeviceLayerCapture& c, const float* base,
                                                int kv_head, std::size_t j) {
  return base + (sz(kv_head) * sz(c.kv_rows) + j) * sz(c.head_dim);
}

// ---- knorm / keydiff norms: sqrt(Σ_c k_c²) in fp64, c in order ----------------------------------
__global__ void key_norms_kernel(DeviceLayerCapture c, double* norms) {
  const std::size_t L = sz(c.length);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_kv_heads) * L) {
    const float* k = key_row(c, c.keys, static_cast<int>(idx / L), idx % L);
    double sq = 0.0;
    for (int e = 0; e < c.head_dim; ++e)
      sq = __dadd_rn(sq, __dmul_rn(static_cast<double>(k[e]), static_cast<double>(k[e])));
    norms[idx] = __dsqrt_rn(sq);
  }
}

__global__ void knorm_kernel(const double* norms, std::size_t total, float* scores) {
  KVAUDIT_GRID_STRIDE(idx, total) { scores[idx] = -static_cast<float>(norms[idx]); }
}

// keydiff: block g, thread c: anchor[c] = (Σ_t k_t[c] / max(‖k_t‖, 1e-12)) / L, t in order; then
// thread 0: ‖anchor‖ = sqrt(Σ_c anchor[c]²), c in order.
__global__ void keydiff_anchor_kernel(DeviceLayerCapture c, const double* norms, double* anchor,
                                      double* anchor_norm) {
  const int g = static_cast<int>(blockIdx.x);
  const std::size_t L = sz(c.length);
  double* a = anchor + sz(g) * sz(c.head_dim);
  for (int e = static_cast<int>(threadIdx.x); e < c.head_dim; e += static_cast<int>(blockDim.x)) {
    double acc = 0.0;
    for (std::size_t t = 0; t < L; ++t) {
      const double norm = norms[sz(g) * L + t];
      const double denom = norm < 1e-12 ? 1e-12 : norm;  // std::max(norm, 1e-12)
      acc = __dadd_rn(acc, __ddiv_rn(static_cast<double>(key_row(c, c.keys, g, t)[e]), denom));
    }
    a[e] = __ddiv_rn(acc, static_cast<double>(L));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double sq = 0.0;
    for (int e = 0; e < c.head_dim; ++e) sq = __dadd_rn(sq, __dmul_rn(a[e], a[e]));
    anchor_norm[g] = __dsqrt_rn(sq);
  }
}

__global__ void keydiff_scores_kernel(DeviceLayerCapture c, const double* norms,
                                      const double* anchor, const double* anchor_norm,
                                      float* scores) {
  const std::size_t L = sz(c.length);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_kv_heads) * L) {
    const int g = static_cast<int>(idx / L);
    const float* k = key_row(c, c.keys, g, idx % L);
    const double* a = anchor + sz(g) * sz(c.head_dim);
    double dot = 0.0;
    for (int e = 0; e < c.head_dim; ++e)
      dot = __dadd_rn(dot, __dmul_rn(static_cast<double>(k[e]), a[e]));
    const double denom_raw = __dmul_rn(norms[idx], anchor_norm[g]);
    const double denom = denom_raw < 1e-8 ? 1e-8 : denom_raw;  // std::max(·, 1e-8)
    scores[idx] = static_cast<float>(__ddiv_rn(-dot, denom));
  }
}

// ---- observed attention -------------------------------------------------------------------------
__global__ void observed_attention_kernel(DeviceLayerCapture c, float* scores) {
  const std::size_t L = sz(c.length);
  const int group = group_of(c);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_kv_heads) * L) {
    const std::size_t kv = idx / L;
    const std::size_t j = idx % L;
    double sum = 0.0;
    for (int m = 0; m < group; ++m) {
      const float s = c.column_sums[(kv * sz(group) + sz(m)) * L + j];
      sum = __dadd_rn(sum, __ddiv_rn(static_cast<double>(s), static_cast<double>(L - j)));
    }
    scores[idx] = static_cast<float>(__ddiv_rn(sum, static_cast<double>(group)));
  }
}

// ---- window attention (methods/window_attention.cpp) --------------------------------------------
// logits [H, w, L]: row r at position L−w+r sees keys j ≤ L−w+r;
// logit = [[f32(Σ_c q_c·k_c in fp64)] / f32(√d)].
__global__ void window_logits_kernel(DeviceLayerCapture c, int window, float scale, float* logits) {
  const std::size_t L = sz(c.length);
  const std::size_t w = sz(window);
  const std::size_t rows = sz(c.window_rows);
  const std::size_t d = sz(c.head_dim);
  const int group = group_of(c);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_heads) * w * L) {
    const std::size_t h = idx / (w * L);
    const std::size_t r = (idx / L) % w;
    const std::size_t j = idx % L;
    const std::size_t last = L - w + r;
    if (j > last) {
      logits[idx] = 0.0f;
      continue;
    }
    const float* q = c.window_queries + (h * rows + (rows - w + r)) * d;
    const float* k = key_row(c, c.keys, static_cast<int>(h) / group, j);
    double dot = 0.0;
    for (std::size_t e = 0; e < d; ++e)
      dot = __dadd_rn(dot, __dmul_rn(static_cast<double>(q[e]), static_cast<double>(k[e])));
    logits[idx] = maybe_bf16(__fdiv_rn(maybe_bf16(static_cast<float>(dot), c.model_is_bf16), scale),
                             c.model_is_bf16);
  }
}

// One thread per (h, r): the row max (std::max order) and Σ f32(exp(f64(s − max))) in fp64, j in
// order.
__global__ void window_row_kernel(DeviceLayerCapture c, int window, const float* logits,
                                  float* row_max, double* row_sum) {
  const std::size_t L = sz(c.length);
  const std::size_t w = sz(window);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_heads) * w) {
    const std::size_t r = idx % w;
    const std::size_t last = L - w + r;
    const float* s = logits + idx * L;
    float top = -INFINITY;
    for (std::size_t j = 0; j <= last; ++j) top = top < s[j] ? s[j] : top;
    double sum = 0.0;
    for (std::size_t j = 0; j <= last; ++j)
      sum = __dadd_rn(sum, static_cast<double>(
                               static_cast<float>(exp(static_cast<double>(__fsub_rn(s[j], top))))));
    row_max[idx] = top;
    row_sum[idx] = sum;
  }
}

__global__ void window_probabilities_kernel(DeviceLayerCapture c, int window, const float* logits,
                                            const float* row_max, const double* row_sum,
                                            float* attn) {
  const std::size_t L = sz(c.length);
  const std::size_t w = sz(window);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_heads) * w * L) {
    const std::size_t row = idx / L;
    const std::size_t j = idx % L;
    const std::size_t last = L - w + row % w;
    if (j > last) {
      attn[idx] = 0.0f;
      continue;
    }
    const float e =
        static_cast<float>(exp(static_cast<double>(__fsub_rn(logits[idx], row_max[row]))));
    attn[idx] = maybe_bf16(static_cast<float>(__ddiv_rn(static_cast<double>(e), row_sum[row])),
                           c.model_is_bf16);
  }
}

// ---- TOVA: mean over all H heads of the last row, shared by every KV head -----------------------
__global__ void tova_kernel(DeviceLayerCapture c, const float* attn, std::size_t scored,
                            float* scores) {
  const std::size_t L = sz(c.length);
  KVAUDIT_GRID_STRIDE(j, L) {
    float mean = 0.0f;
    if (j < scored) {
      double sum = 0.0;
      for (int h = 0; h < c.num_heads; ++h)
        sum = __dadd_rn(sum, static_cast<double>(attn[sz(h) * L + j]));
      mean = maybe_bf16(static_cast<float>(__ddiv_rn(sum, static_cast<double>(c.num_heads))),
                        c.model_is_bf16);
    }
    for (int kv = 0; kv < c.num_kv_heads; ++kv) scores[sz(kv) * L + j] = mean;
  }
}

// ---- SnapKV -------------------------------------------------------------------------------------
// agg[h, j] = [f32(Σ_r attn[h, r, j])] (original) or [f32(Σ_r … / w)] (kvpress), j < P = L − w.
__global__ void snapkv_window_aggregate_kernel(DeviceLayerCapture c, int window, bool mean,
                                               const float* attn, float* aggregate) {
  const std::size_t L = sz(c.length);
  const std::size_t w = sz(window);
  const std::size_t P = L - w;
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_heads) * P) {
    const std::size_t h = idx / P;
    const std::size_t j = idx % P;
    double sum = 0.0;
    for (std::size_t r = 0; r < w; ++r)
      sum = __dadd_rn(sum, static_cast<double>(attn[(h * w + r) * L + j]));
    aggregate[idx] =
        maybe_bf16(static_cast<float>(mean ? __ddiv_rn(sum, static_cast<double>(window)) : sum),
                   c.model_is_bf16);
  }
}

// methods::pool_scores over `rows` rows of n entries (input row stride n, output row stride
// out_stride): avg = [f32(Σ_{lo..hi} x / k)] (zero padding counted), max over [lo, hi] (no
// rounding, as the CPU).
__global__ void pool_kernel(const float* input, std::size_t rows, std::size_t n, int kernel_size,
                            bool max_pooling, bool bf16, float* output, std::size_t out_stride) {
  const std::ptrdiff_t pad = kernel_size / 2;
  KVAUDIT_GRID_STRIDE(idx, rows * n) {
    const std::size_t row = idx / n;
    const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(idx % n);
    const float* x = input + row * n;
    const std::ptrdiff_t lo = j - pad < 0 ? 0 : j - pad;
    const std::ptrdiff_t hi =
        j + pad > static_cast<std::ptrdiff_t>(n) - 1 ? static_cast<std::ptrdiff_t>(n) - 1 : j + pad;
    float value;
    if (!max_pooling) {
      double sum = 0.0;
      for (std::ptrdiff_t t = lo; t <= hi; ++t) sum = __dadd_rn(sum, static_cast<double>(x[t]));
      value =
          maybe_bf16(static_cast<float>(__ddiv_rn(sum, static_cast<double>(kernel_size))), bf16);
    } else {
      value = x[lo];
      for (std::ptrdiff_t t = lo + 1; t <= hi; ++t) value = value < x[t] ? x[t] : value;
    }
    output[row * out_stride + static_cast<std::size_t>(j)] = value;
  }
}

// group[kv, j] = [f32(Σ_m per_head[kv·g + m, j] / g)], j < P, into out (row stride out_stride).
__global__ void group_mean_kernel(DeviceLayerCapture c, const float* per_head, std::size_t P,
                                  float* out, std::size_t out_stride) {
  const int group = group_of(c);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_kv_heads) * P) {
    const std::size_t kv = idx / P;
    const std::size_t j = idx % P;
    double sum = 0.0;
    for (int m = 0; m < group; ++m)
      sum = __dadd_rn(sum, static_cast<double>(per_head[(kv * sz(group) + sz(m)) * P + j]));
    out[kv * out_stride + j] =
        maybe_bf16(static_cast<float>(__ddiv_rn(sum, static_cast<double>(group))), c.model_is_bf16);
  }
}

// ---- ExpectedAttention --------------------------------------------------------------------------
// z[h, t] = μ'·k_j/√d (+ k_jᵀ Σ' k_j / d / 2), j = n_sink + t.
__global__ void expected_logits_kernel(DeviceLayerCapture c, int sink, const double* mu_rot,
                                       const double* cov_rot, bool use_covariance, double sqrt_d,
                                       double* z) {
  const std::size_t L = sz(c.length);
  const std::size_t n = L - sz(sink);
  const std::size_t d = sz(c.head_dim);
  const int group = group_of(c);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_heads) * n) {
    const std::size_t h = idx / n;
    const std::size_t j = sz(sink) + idx % n;
    const float* k = key_row(c, c.keys, static_cast<int>(h) / group, j);
    const double* mu = mu_rot + h * d;
    double lin = 0.0;
    for (std::size_t e = 0; e < d; ++e)
      lin = __dadd_rn(lin, __dmul_rn(mu[e], static_cast<double>(k[e])));
    double value = __ddiv_rn(lin, sqrt_d);
    if (use_covariance) {
      const double* cov = cov_rot + h * d * d;
      double quad = 0.0;
      for (std::size_t a = 0; a < d; ++a) {
        double row = 0.0;
        for (std::size_t b = 0; b < d; ++b)
          row = __dadd_rn(row, __dmul_rn(cov[a * d + b], static_cast<double>(k[b])));
        quad = __dadd_rn(quad, __dmul_rn(static_cast<double>(k[a]), row));
      }
      value = __dadd_rn(value, __ddiv_rn(__ddiv_rn(quad, static_cast<double>(d)), 2.0));
    }
    z[idx] = value;
  }
}

// One thread per head: z ← exp(z − max), total = Σ z (t in order).
__global__ void expected_softmax_kernel(int heads, std::size_t n, double* z, double* totals) {
  KVAUDIT_GRID_STRIDE(h, sz(heads)) {
    double* row = z + h * n;
    double top = -INFINITY;
    for (std::size_t t = 0; t < n; ++t) top = top < row[t] ? row[t] : top;
    double total = 0.0;
    for (std::size_t t = 0; t < n; ++t) {
      row[t] = exp(__dsub_rn(row[t], top));
      total = __dadd_rn(total, row[t]);
    }
    totals[h] = total;
  }
}

__global__ void expected_scores_kernel(DeviceLayerCapture c, int sink, const double* z,
                                       const double* totals, bool use_vnorm, double epsilon,
                                       float* scores) {
  const std::size_t L = sz(c.length);
  const std::size_t n = L - sz(sink);
  const int group = group_of(c);
  KVAUDIT_GRID_STRIDE(idx, sz(c.num_kv_heads) * L) {
    const std::size_t kv = idx / L;
    const std::size_t j = idx % L;
    if (j < sz(sink)) {
      scores[idx] = 0.0f;
      continue;
    }
    const std::size_t t = j - sz(sink);
    double sum = 0.0;  // CPU: group_sum += z/total over the group's heads in order
    for (int m = 0; m < group; ++m) {
      const std::size_t h = kv * sz(group) + sz(m);
      sum = __dadd_rn(sum, __ddiv_rn(z[h * n + t], totals[h]));
    }
    double s = __ddiv_rn(sum, static_cast<double>(group));
    if (use_vnorm) {
      const float* v = key_row(c, c.values, static_cast<int>(kv), j);
      double sq = 0.0;
      for (int e = 0; e < c.head_dim; ++e)
        sq = __dadd_rn(sq, __dmul_rn(static_cast<double>(v[e]), static_cast<double>(v[e])));
      s = __dmul_rn(__dadd_rn(s, epsilon), __dsqrt_rn(sq));
    }
    scores[idx] = static_cast<float>(s);
  }
}

// ---- protected positions: layer max + 1 (methods::protect_with_max_plus_one) --------------------
// One block: max over entries whose position is outside [begin, end), then those inside get
// max + 1 (1 when every entry is protected); with round_all every score is rounded to bf16 after.
__global__ void __launch_bounds__(kReduceThreads)
    protect_kernel(float* scores, std::size_t heads, std::size_t length, std::size_t begin,
                   std::size_t end, bool round_all) {
  __shared__ float part_max[kReduceThreads];
  __shared__ int part_any[kReduceThreads];
  const std::size_t total = heads * length;
  const int tid = static_cast<int>(threadIdx.x);
  float top = -INFINITY;
  int any = 0;
  for (std::size_t i = sz(tid); i < total; i += kReduceThreads) {
    const std::size_t j = i % length;
    if (j >= begin && j < end) continue;
    const float v = scores[i];
    top = v > top ? v : top;
    any = 1;
  }
  part_max[tid] = top;
  part_any[tid] = any;
  __syncthreads();
  for (int stride = kReduceThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      part_max[tid] =
          part_max[tid + stride] > part_max[tid] ? part_max[tid + stride] : part_max[tid];
      part_any[tid] = part_any[tid] | part_any[tid + stride];
    }
    __syncthreads();
  }
  const float value = part_any[0] ? __fadd_rn(part_max[0], 1.0f) : 1.0f;
  for (std::size_t i = sz(tid); i < total; i += kReduceThreads) {
    const std::size_t j = i % length;
    float v = (j >= begin && j < end) ? value : scores[i];
    if (round_all) v = round_bf16(v);
    scores[i] = v;
  }
}

// ---- host side ----------------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& scorer, const DeviceLayerCapture& c,
                       const std::string& what) {
  throw std::invalid_argument("gpu scorer " + scorer + ": layer " + std::to_string(c.layer) +
                              " capture: " + what);
}

void check_basics(const DeviceLayerCapture& c, const std::string& scorer) {
  if (c.num_heads < 1 || c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0 || c.head_dim < 1)
    fail(scorer, c, "bad head shape");
  if (c.length < 1 || c.length > c.kv_rows)
    fail(scorer, c,
         "length " + std::to_string(c.length) + " outside 1..kv_rows (" +
             std::to_string(c.kv_rows) + ")");
  if (c.keys == nullptr || c.values == nullptr) fail(scorer, c, "null keys or values");
}

void check_window(const DeviceLayerCapture& c, int window, const std::string& scorer) {
  check_basics(c, scorer);
  if (window < 1 || window > c.window_rows || c.window_queries == nullptr)
    fail(scorer, c,
         "needs " + std::to_string(window) + " window rows, has " + std::to_string(c.window_rows));
}

void launch_protect(float* scores, const DeviceLayerCapture& c, int begin, int end, bool round_all,
                    cudaStream_t stream) {
  protect_kernel<<<1, kReduceThreads, 0, stream>>>(scores, sz(c.num_kv_heads), sz(c.length),
                                                   sz(begin), sz(end), round_all);
  KVAUDIT_CUDA_CHECK_LAUNCH();
}

// attn [H, w, L] as methods::window_attention computes it.
DeviceBuffer<float> window_attention(const DeviceLayerCapture& c, int window, cudaStream_t stream) {
  const std::size_t total = sz(c.num_heads) * sz(window) * sz(c.length);
  DeviceBuffer<float> logits(total);
  DeviceBuffer<float> attn(total);
  DeviceBuffer<float> row_max(sz(c.num_heads) * sz(window));
  DeviceBuffer<double> row_sum(sz(c.num_heads) * sz(window));
  const auto scale = static_cast<float>(std::sqrt(static_cast<double>(c.head_dim)));
  window_logits_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, window, scale, logits.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  window_row_kernel<<<blocks_for(row_max.size()), kThreads, 0, stream>>>(
      c, window, logits.data(), row_max.data(), row_sum.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  window_probabilities_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
      c, window, logits.data(), row_max.data(), row_sum.data(), attn.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the temporaries are freed
  return attn;
}

void score_knorm(const DeviceLayerCapture& c, float* scores, cudaStream_t stream) {
  check_basics(c, "knorm");
  const std::size_t total = sz(c.num_kv_heads) * sz(c.length);
  DeviceBuffer<double> norms(total);
  key_norms_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, norms.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  knorm_kernel<<<blocks_for(total), kThreads, 0, stream>>>(norms.data(), total, scores);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void score_keydiff(const DeviceLayerCapture& c, float* scores, cudaStream_t stream) {
  check_basics(c, "keydiff");
  const std::size_t total = sz(c.num_kv_heads) * sz(c.length);
  DeviceBuffer<double> norms(total);
  DeviceBuffer<double> anchor(sz(c.num_kv_heads) * sz(c.head_dim));
  DeviceBuffer<double> anchor_norm(sz(c.num_kv_heads));
  key_norms_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, norms.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  keydiff_anchor_kernel<<<static_cast<unsigned>(c.num_kv_heads), 128, 0, stream>>>(
      c, norms.data(), anchor.data(), anchor_norm.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  keydiff_scores_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, norms.data(), anchor.data(),
                                                                    anchor_norm.data(), scores);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void score_observed_attention(const DeviceLayerCapture& c, float* scores, cudaStream_t stream) {
  check_basics(c, "observed_attention");
  if (c.column_sums == nullptr) fail("observed_attention", c, "no column sums were captured");
  const std::size_t total = sz(c.num_kv_heads) * sz(c.length);
  observed_attention_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, scores);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void score_tova(const DeviceLayerCapture& c, methods::TovaVariant variant, float* scores,
                cudaStream_t stream) {
  const bool kvpress = variant == methods::TovaVariant::kvpress;
  check_window(c, 1, "tova");
  if (kvpress && c.length <= 1) fail("tova", c, "L must exceed the window of 1");
  const DeviceBuffer<float> attn = window_attention(c, 1, stream);
  const std::size_t scored = kvpress ? sz(c.length) - 1 : sz(c.length);
  tova_kernel<<<blocks_for(sz(c.length)), kThreads, 0, stream>>>(c, attn.data(), scored, scores);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  if (kvpress) launch_protect(scores, c, c.length - 1, c.length, c.model_is_bf16, stream);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void score_snapkv(const DeviceLayerCapture& c, const methods::SnapKvParams& params, float* scores,
                  cudaStream_t stream) {
  const int w = params.window;
  check_window(c, w, "snapkv");
  if (w >= c.length)
    fail("snapkv", c,
         "L = " + std::to_string(c.length) + " must exceed the window " + std::to_string(w));
  if (params.kernel_size < 1 || params.kernel_size % 2 == 0)
    fail("snapkv", c, "kernel_size must be odd and >= 1");
  const bool original = params.variant == methods::SnapKvVariant::original;
  const bool max_pooling = params.pooling == methods::Pooling::max;
  const bool bf16 = c.model_is_bf16;
  const std::size_t P = sz(c.length) - sz(w);
  const std::size_t L = sz(c.length);
  const DeviceBuffer<float> attn = window_attention(c, w, stream);
  DeviceBuffer<float> aggregate(sz(c.num_heads) * P);
  snapkv_window_aggregate_kernel<<<blocks_for(aggregate.size()), kThreads, 0, stream>>>(
      c, w, !original, attn.data(), aggregate.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  if (original) {
    // Group mean first (into a [Hkv, P] buffer), then pool into the scores.
    DeviceBuffer<float> group(sz(c.num_kv_heads) * P);
    group_mean_kernel<<<blocks_for(group.size()), kThreads, 0, stream>>>(c, aggregate.data(), P,
                                                                         group.data(), P);
    KVAUDIT_CUDA_CHECK_LAUNCH();
    pool_kernel<<<blocks_for(group.size()), kThreads, 0, stream>>>(
        group.data(), sz(c.num_kv_heads), P, params.kernel_size, max_pooling, bf16, scores, L);
    KVAUDIT_CUDA_CHECK_LAUNCH();
    launch_protect(scores, c, c.length - w, c.length, bf16, stream);
    KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  } else {
    // Pool each query head, then the group mean into the scores.
    DeviceBuffer<float> pooled(sz(c.num_heads) * P);
    pool_kernel<<<blocks_for(pooled.size()), kThreads, 0, stream>>>(
        aggregate.data(), sz(c.num_heads), P, params.kernel_size, max_pooling, bf16, pooled.data(),
        P);
    KVAUDIT_CUDA_CHECK_LAUNCH();
    group_mean_kernel<<<blocks_for(sz(c.num_kv_heads) * P), kThreads, 0, stream>>>(c, pooled.data(),
                                                                                   P, scores, L);
    KVAUDIT_CUDA_CHECK_LAUNCH();
    launch_protect(scores, c, c.length - w, c.length, bf16, stream);
    KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

void score_expected_attention(const DeviceLayerCapture& c,
                              const methods::ExpectedAttentionParams& params,
                              std::span<const float> rope_inv_freq, float* scores,
                              cudaStream_t stream) {
  const std::string name = "expected_attention";
  check_basics(c, name);
  if (c.query_sum == nullptr || c.query_outer == nullptr)
    fail(name, c, "no query moments were captured");
  if (c.moments_first_row != params.n_sink)
    fail(name, c,
         "query moments start at row " + std::to_string(c.moments_first_row) +
             " but the method drops the first " + std::to_string(params.n_sink));
  if (c.query_count < 1 || c.query_count != c.length - c.moments_first_row)
    fail(name, c, "query_count " + std::to_string(c.query_count) + " != L - moments_first_row");
  if (c.length <= params.n_sink) fail(name, c, "length must exceed n_sink (kvpress asserts it)");
  if (rope_inv_freq.size() != sz(c.head_dim / 2) || c.head_dim % 2 != 0)
    fail(name, c,
         "rope_inv_freq has " + std::to_string(rope_inv_freq.size()) +
             " entries, expected head_dim/2 = " + std::to_string(c.head_dim / 2));
  const std::size_t H = sz(c.num_heads);
  const std::size_t d = sz(c.head_dim);
  std::vector<double> query_sum(H * d), query_outer(H * d * d);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  KVAUDIT_CUDA_CHECK(cudaMemcpy(query_sum.data(), c.query_sum, query_sum.size() * sizeof(double),
                                cudaMemcpyDeviceToHost));
  KVAUDIT_CUDA_CHECK(cudaMemcpy(query_outer.data(), c.query_outer,
                                query_outer.size() * sizeof(double), cudaMemcpyDeviceToHost));

  // μ' = R̄ μ and Σ' = R̄ Σ R̄ᵀ per head with the CPU scorer's own function (O(H·d³), host).
  const auto n = static_cast<double>(c.query_count);
  const auto R =
      methods::averaged_rope_rotation(rope_inv_freq, c.length, params.n_future_positions);
  std::vector<double> mu_rot(H * d, 0.0), cov_rot(H * d * d, 0.0);
  for (std::size_t h = 0; h < H; ++h) {
    methods::rotate_query_moments(query_sum.data() + h * d, query_outer.data() + h * d * d, n, R, d,
                                  params.use_covariance, mu_rot.data() + h * d,
                                  cov_rot.data() + h * d * d);
  }
  DeviceBuffer<double> mu_device(mu_rot.size()), cov_device(cov_rot.size());
  mu_device.upload(mu_rot);
  cov_device.upload(cov_rot);

  const std::size_t count = sz(c.length) - sz(params.n_sink);
  DeviceBuffer<double> z(H * count);
  DeviceBuffer<double> totals(H);
  expected_logits_kernel<<<blocks_for(z.size()), kThreads, 0, stream>>>(
      c, params.n_sink, mu_device.data(), cov_device.data(), params.use_covariance,
      std::sqrt(static_cast<double>(d)), z.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  expected_softmax_kernel<<<blocks_for(H), kThreads, 0, stream>>>(c.num_heads, count, z.data(),
                                                                  totals.data());
  KVAUDIT_CUDA_CHECK_LAUNCH();
  const std::size_t total = sz(c.num_kv_heads) * sz(c.length);
  expected_scores_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
      c, params.n_sink, z.data(), totals.data(), params.use_vnorm, params.epsilon, scores);
  KVAUDIT_CUDA_CHECK_LAUNCH();
  launch_protect(scores, c, 0, params.n_sink, false, stream);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

std::optional<GpuScorerSpec> gpu_scorer_for(const methods::MethodParams& params) {
  return std::visit(
      [](const auto& p) -> std::optional<GpuScorerSpec> {
        using P = std::decay_t<decltype(p)>;
        GpuScorerSpec spec;
        if constexpr (std::is_same_v<P, methods::KnormParams>) {
          spec.kind = GpuScorerKind::knorm;
        } else if constexpr (std::is_same_v<P, methods::KeyDiffParams>) {
          if (p.variant != methods::KeyDiffVariant::oneshot) return std::nullopt;
          spec.kind = GpuScorerKind::keydiff;
        } else if constexpr (std::is_same_v<P, methods::TovaParams>) {
          spec.kind = GpuScorerKind::tova;
          spec.tova = p.variant;
        } else if constexpr (std::is_same_v<P, methods::SnapKvParams>) {
          spec.kind = GpuScorerKind::snapkv;
          spec.snapkv = p;
        } else if constexpr (std::is_same_v<P, methods::ObservedAttentionParams>) {
          spec.kind = GpuScorerKind::observed_attention;
        } else if constexpr (std::is_same_v<P, methods::ExpectedAttentionParams>) {
          spec.kind = GpuScorerKind::expected_attention;
          spec.expected = p;
        } else {
          return std::nullopt;
        }
        return spec;
      },
      params);
}

void score_on_gpu(const GpuScorerSpec& spec, const DeviceLayerCapture& layer,
                  std::span<const float> rope_inv_freq, float* scores, cudaStream_t stream) {
  if (scores == nullptr) throw std::invalid_argument("score_on_gpu: null scores buffer");
  switch (spec.kind) {
    case GpuScorerKind::knorm:
      return score_knorm(layer, scores, stream);
    case GpuScorerKind::keydiff:
      return score_keydiff(layer, scores, stream);
    case GpuScorerKind::tova:
      return score_tova(layer, spec.tova, scores, stream);
    case GpuScorerKind::snapkv:
      return score_snapkv(layer, spec.snapkv, scores, stream);
    case GpuScorerKind::observed_attention:
      return score_observed_attention(layer, scores, stream);
    case GpuScorerKind::expected_attention:
      return score_expected_attention(layer, spec.expected, rope_inv_freq, scores, stream);
  }
  throw std::invalid_argument("score_on_gpu: unknown scorer kind");
}

}  // namespace kvaudit::cuda
