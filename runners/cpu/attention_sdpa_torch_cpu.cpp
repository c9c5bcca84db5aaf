// sdpa as PyTorch's CPU flash-attention kernel computes it — an opt-in emulation used only to
// compare with golden logits that HF transformers produced on a CPU
// (CpuModelOptions::sdpa_numerics = SdpaNumerics::torch_cpu_flash). The default sdpa backend
// (attention_sdpa.cpp) follows FlashAttention's GPU numerics (docs/design/numerics.md §sdpa);
// the two differ only in the softmax exponential and summation details below.
//
// What torch 2.15's `_scaled_dot_product_flash_attention_for_cpu`
// (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) does, restated (no code copied):
//   * Query rows are split in blocks of qSplit = 256 (q_len ≥ 768), 64 (q_len ≥ 192), else 32
//     (at most q_len); keys in blocks of 512. With is_causal (HF's unpadded prefill, q_len > 1) a
//     query block starting at row m processes the keys [0, min(kv_len, m + qBlockSize)); the
//     keys it may not see are −∞.
//   * Per row and key block of B keys: s' = (q·k)·scale in fp32; m' = max(m, max s');
//     p = exp(s' − m') where the first 16·⌊B/16⌋ keys (whole AVX-512 vectors) use the vectorized
//     approximation — `fexp_u20` when the output dtype is bf16/fp16, `exp_u20` for fp32 — and the
//     remaining keys std::exp; the vector part's sum is accumulated lane-wise, reduced as a tree
//     (lanes i and i+8, then i+4, i+2, i+1) and the tail added in order; l = Σp + exp(m − m')·l;
//     the value accumulator is rescaled by exp(m − m') and gets Σ [p]·v ([p] = p rounded to bf16
//     for a bf16 model, p itself in fp32); out = [acc / l].
//   * fexp_u20 (Malossi et al., "Fast Exponential Computation on SIMD Architectures"): y = x·log2e,
//     f = y − ⌊y⌋, c(f) = ((c3·f + c2)·f + c1)·f + c0 by FMAs, result bits =
//     trunc(2²³·(y − c(f)) + 2²³·127) (relative error ≈ 1e-4); x < ln(FLT_MIN) gives 0,
//     x > ln(FLT_MAX) gives +∞.
//   * exp_u20: n = ⌊x·log2e + ½⌋, r = x − n·ln2, a degree-5 polynomial by FMAs, times 2^(n−1)·2.
// With this emulation our bf16 sdpa logits of the tiny golden models equal HF's bit for bit
// (tests/parity). It is slow (scalar) and never used for measurements.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runners/cpu/attention.h"
#include "runners/cpu/attention_visibility.h"

namespace kvaudit::cpu {
namespace {

constexpr std::size_t kTorchLanes = 16;      // floats per AVX-512 vector
constexpr std::size_t kTorchKeySplit = 512;  // kvSplitSize

float bits_to_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

const float kLog2e = bits_to_float(0x3fb8aa3bu);
const float kLn2 = bits_to_float(0x3f317218u);
const float kLnFloatMin = bits_to_float(0xc2aeac50u);
const float kLnFloatMax = bits_to_float(0x42b17218u);

float torch_fexp_u20(float x) {
  if (x < kLnFloatMin) return 0.0f;
  if (x > kLnFloatMax) return std::numeric_limits<float>::infinity();
  constexpr float c0 = 0.00010703434948458272f;
  constexpr float c1 = 0.30354260500649682f;
  constexpr float c2 = -0.22433836478672356f;
  constexpr float c3 = -0.079204240219773236f;
  constexpr float two_23 = 8388608.0f;
  constexpr float bias = 8388608.0f * 127.0f;
  float y = x * kLog2e;
  const float f = y - std::floor(y);
  float c = std::fma(f, c3, c2);
  c = std::fma(f, c, c1);
  c = std::fma(f, c, c0);
  y = y - c;
  const float t = std::fma(two_23, y, bias);
  return bits_to_float(static_cast<std::uint32_t>(static_cast<std::int32_t>(t)));
}

float torch_exp_u20(float x) {
  const bool underflow = x < kLnFloatMin;
  const float src = std::max(std::min(x, kLnFloatMax), kLnFloatMin);
  const float fx = std::floor(std::fma(src, kLog2e, 0.5f));
  const float r = std::fma(-fx, kLn2, src);
  float p = std::fma(r, 0.00828929059f, 0.0418978221f);
  p = std::fma(r, p, 0.166676521f);
  p = std::fma(r, p, 0.499991506f);
  p = std::fma(r, p, 0.999999701f);
  p = std::fma(r, p, 1.0f);
  const std::int32_t exponent = static_cast<std::int32_t>(fx - 1.0f) + 127;
  const float power = underflow ? 0.0f : bits_to_float(static_cast<std::uint32_t>(exponent) << 23);
  return p * power * 2.0f;
}

std::size_t torch_query_split(std::size_t q_len) {
  const std::size_t split = q_len >= 768 ? 256 : (q_len >= 192 ? 64 : 32);
  return std::min(split, q_len);
}

}  // namespace

void sdpa_torch_cpu_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                                   std::span<float> out) {
  const std::size_t dim = static_cast<std::size_t>(problem.head_dim);
  const std::size_t heads = static_cast<std::size_t>(problem.num_heads);
  const std::size_t group = static_cast<std::size_t>(problem.num_heads / problem.num_kv_heads);
  const KvHeadView& kv = problem.kv_heads[static_cast<std::size_t>(task.kv_head)];
  const bool bf16 = problem.rounding == Rounding::bf16;
  const std::size_t q_len = problem.num_rows();
  if (q_len == 0) return;
  // HF calls torch with is_causal for a multi-token prefill and with no mask for one token.
  const std::size_t past = static_cast<std::size_t>(std::max(0, problem.query_positions[0]));
  const std::size_t kv_len = kv.size();
  const std::size_t q_split = torch_query_split(q_len);
  std::vector<float> scores(kv_len), probabilities(kv_len), acc(dim);

  for (std::size_t row = task.row_begin; row < task.row_end; ++row) {
    const std::size_t visible = visible_prefix(kv.positions, problem.query_positions[row]);
    const std::size_t block_start = row / q_split * q_split;
    const std::size_t block_rows = std::min(q_split, q_len - block_start);
    const std::size_t num_keys =
        q_len > 1 ? std::min(kv_len, past + block_start + block_rows) : kv_len;
    for (std::size_t g = 0; g < group; ++g) {
      const std::size_t head = static_cast<std::size_t>(task.kv_head) * group + g;
      const float* q = problem.queries.data() + (row * heads + head) * dim;
      float running_max = -std::numeric_limits<float>::infinity();
      float running_sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::size_t n = 0; n < num_keys; n += kTorchKeySplit) {
        const std::size_t block = std::min(kTorchKeySplit, num_keys - n);
        float block_max = -std::numeric_limits<float>::infinity();
        for (std::size_t j = 0; j < block; ++j) {
          const std::size_t key = n + j;
          float s = -std::numeric_limits<float>::infinity();
          if (key < visible) {
            const float* k = kv.keys.data() + key * dim;
            float dot = 0.0f;
            for (std::size_t e = 0; e < dim; ++e) dot += q[e] * k[e];
            s = dot * problem.scale;
          }
          scores[j] = s;
          block_max = std::max(block_max, s);
        }
        const float new_max = std::max(running_max, block_max);
        if (new_max == -std::numeric_limits<float>::infinity()) continue;
        const std::size_t vector_part = block / kTorchLanes * kTorchLanes;
        float lanes[kTorchLanes] = {};
        for (std::size_t j = 0; j < vector_part; ++j) {
          const float x = scores[j] - new_max;
          const float p = bf16 ? torch_fexp_u20(x) : torch_exp_u20(x);
          probabilities[j] = p;
          lanes[j % kTorchLanes] += p;
        }
        for (std::size_t width = kTorchLanes / 2; width >= 1; width /= 2) {
          for (std::size_t i = 0; i < width; ++i) lanes[i] += lanes[i + width];
        }
        float block_sum = lanes[0];
        for (std::size_t j = vector_part; j < block; ++j) {
          const float p = std::exp(scores[j] - new_max);
          probabilities[j] = p;
          block_sum += p;
        }
        const float correction = std::exp(running_max - new_max);
        running_sum = block_sum + correction * running_sum;
        running_max = new_max;
        for (std::size_t d = 0; d < dim; ++d) acc[d] *= correction;
        for (std::size_t j = 0; j < block && n + j < visible; ++j) {
          const float p = round_as(problem.rounding, probabilities[j]);
          const float* v = kv.values.data() + (n + j) * dim;
          for (std::size_t d = 0; d < dim; ++d) acc[d] += p * v[d];
        }
      }
      float* output = out.data() + (row * heads + head) * dim;
      for (std::size_t d = 0; d < dim; ++d) {
        output[d] = visible == 0 ? 0.0f : round_as(problem.rounding, acc[d] / running_sum);
      }
    }
  }
}

}  // namespace kvaudit::cpu
