// FastKvzipMethod (fastkvzip.h): the gate forward and the KVzip-style selection.
#include "methods/fastkvzip.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/extra_pass.h"
#include "methods/kvzip.h"

namespace kvaudit::methods {
namespace {

// kvpress switches from window_ratio·L to window_size at this context length.
constexpr std::int64_t kLongContext = 32000;
// FastKVzipGate's RMSNorms are Qwen3RMSNorm with its default epsilon.
constexpr double kNormEpsilon = 1e-6;

// x·w over n elements, accumulated in double, returned as f32 (a BLAS dot up to f32 rounding).
float gate_dot(const float* x, const float* w, std::size_t n) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(w[i]);
  return static_cast<float>(sum);
}

// Qwen3RMSNorm of one o-vector in place: f32 statistics, the normalised vector cast back to the
// input dtype (bf16 for a bf16 model), times the f32 weight.
void rms_norm(float* v, const std::vector<float>& weight, bool bf16) {
  const std::size_t n = weight.size();
  double squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) squares += static_cast<double>(v[i]) * v[i];
  const float variance = static_cast<float>(squares / static_cast<double>(n));
  const float inverse =
      1.0f / std::sqrt(variance + static_cast<float>(kNormEpsilon));  // torch.rsqrt in f32
  for (std::size_t i = 0; i < n; ++i) v[i] = weight[i] * maybe_bf16(v[i] * inverse, bf16);
}

}  // namespace

std::vector<float> fastkvzip_gate_scores(const FastKvzipGate& gate,
                                         std::span<const float> attention_input, int length,
                                         bool model_is_bf16) {
  const std::size_t hidden = to_size(gate.input_dim);
  const std::size_t o = to_size(gate.output_dim);
  const std::size_t kv_heads = to_size(gate.kv_heads);
  const std::size_t groups = to_size(gate.groups);
  const std::size_t sinks = to_size(gate.sinks);
  if (length < 0 || attention_input.size() != to_size(length) * hidden)
    throw std::invalid_argument("fastkvzip: the attention input has " +
                                std::to_string(attention_input.size()) + " values, expected " +
                                std::to_string(length) + " positions × " + std::to_string(hidden));
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(o)));
  std::vector<float> scores(kv_heads * to_size(length));
  const std::ptrdiff_t count = length;
#pragma omp parallel for schedule(static) if (count > 64)
  for (std::ptrdiff_t tt = 0; tt < count; ++tt) {
    const std::size_t t = static_cast<std::size_t>(tt);
    const float* x = attention_input.data() + t * hidden;
    std::vector<float> query(groups * o), key(o);
    for (std::size_t h = 0; h < kv_heads; ++h) {
      for (std::size_t e = 0; e < o; ++e) {
        const std::size_t row = h * o + e;
        key[e] =
            maybe_bf16(gate_dot(x, gate.k_weight.data() + row * hidden, hidden), model_is_bf16);
      }
      rms_norm(key.data(), gate.k_norm, model_is_bf16);
      float sum = 0.0f;
      for (std::size_t g = 0; g < groups; ++g) {
        float* q = query.data() + g * o;
        for (std::size_t e = 0; e < o; ++e) {
          const std::size_t row = (h * groups + g) * o + e;
          q[e] = maybe_bf16(
              gate_dot(x, gate.q_weight.data() + row * hidden, hidden) + gate.q_bias[row],
              model_is_bf16);
        }
        rms_norm(q, gate.q_norm, model_is_bf16);
        const float logit = gate_dot(key.data(), q, o) / scale + gate.bias[h * groups + g];
        float exp_sum = 0.0f;
        for (std::size_t s = 0; s < sinks; ++s) {
          const float base = gate_dot(gate.k_base.data() + (h * sinks + s) * o, q, o) / scale;
          exp_sum += std::exp(base - logit);
        }
        sum += 1.0f / (1.0f + exp_sum);
      }
      scores[h * to_size(length) + t] = sum / static_cast<float>(groups);
    }
  }
  return scores;
}

std::int64_t fastkvzip_window(const FastKvzipParams& params, std::int64_t length) {
  if (length < kLongContext)
    return std::max<std::int64_t>(
        1, static_cast<std::int64_t>(static_cast<double>(length) * params.window_ratio));
  return params.window_size;
}

FastKvzipMethod::FastKvzipMethod(FastKvzipParams params) : params_(std::move(params)) {
  if (params_.n_sink < 0) throw std::invalid_argument("fastkvzip: n_sink must be >= 0");
  if (params_.window_size < 1) throw std::invalid_argument("fastkvzip: window_size must be >= 1");
  if (!(params_.window_ratio >= 0.0 && params_.window_ratio <= 1.0))
    throw std::invalid_argument("fastkvzip: window_ratio must be in [0, 1]");
}

FastKvzipMethod::FastKvzipMethod(FastKvzipParams params, std::vector<FastKvzipGate> gates)
    : FastKvzipMethod(std::move(params)) {
  gates_ = std::make_shared<const std::vector<FastKvzipGate>>(std::move(gates));
}

const std::vector<FastKvzipGate>& FastKvzipMethod::gates() const {
  const std::lock_guard<std::mutex> lock(gates_mutex_);
  if (!gates_) {
    if (params_.gates.empty())
      throw std::invalid_argument("fastkvzip: no gates file (the `gates` parameter)");
    gates_ =
        std::make_shared<const std::vector<FastKvzipGate>>(read_fastkvzip_gates(params_.gates));
  }
  return *gates_;
}

std::vector<float> FastKvzipMethod::scores(std::span<const LayerCapture> layers) const {
  const int length = check_layers(layers, name());
  const std::vector<FastKvzipGate>& all = gates();
  const LayerCapture& first = layers.front();
  const FastKvzipGate& g0 = all.front();
  if (all.size() != layers.size() || g0.kv_heads != first.num_kv_heads ||
      g0.groups != first.group_size() || g0.input_dim != first.hidden_size) {
    throw std::invalid_argument(
        "fastkvzip: the gates (" + std::to_string(all.size()) + " layers, " +
        std::to_string(g0.kv_heads) + " KV heads, " + std::to_string(g0.groups) +
        " groups, hidden " + std::to_string(g0.input_dim) + ") do not fit the model (" +
        std::to_string(layers.size()) + " layers, " + std::to_string(first.num_kv_heads) +
        " KV heads, " + std::to_string(first.group_size()) + " groups, hidden " +
        std::to_string(first.hidden_size) + ")");
  }
  const std::size_t per_layer = to_size(first.num_kv_heads) * to_size(length);
  const std::int64_t sinks = std::min<std::int64_t>(params_.n_sink, length);
  const std::int64_t window = std::min<std::int64_t>(fastkvzip_window(params_, length), length);
  std::vector<float> out(layers.size() * per_layer);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerCapture& layer = layers[l];
    if (layer.attention_input.size() != to_size(length) * to_size(layer.hidden_size))
      throw std::invalid_argument(
          "fastkvzip: layer " + std::to_string(layer.layer) + " has " +
          std::to_string(layer.attention_input.size()) + " attention-input values for length " +
          std::to_string(length) +
          " (was attention_input captured? the CPU capture records it; the CUDA capture does "
          "not: run with --device cpu)");
    std::vector<float> s =
        fastkvzip_gate_scores(all[l], layer.attention_input, length, layer.model_is_bf16);
    for (int h = 0; h < layer.num_kv_heads; ++h) {
      float* row = s.data() + to_size(h) * to_size(length);
      std::fill(row, row + sinks, 1.0f);
      std::fill(row + (length - window), row + length, 1.0f);
    }
    std::copy(s.begin(), s.end(), out.begin() + static_cast<std::ptrdiff_t>(l * per_layer));
  }
  return out;
}

Selection FastKvzipMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                  const SelectionContext& context) const {
  (void)context;
  if (!(budget.compression >= 0.0 && budget.compression < 1.0)) {
    throw std::invalid_argument(name() + ": compression " + std::to_string(budget.compression) +
                                " is outside [0, 1)");
  }
  ExtraPassResult protected_scores;
  protected_scores.scores = scores(layers);
  protected_scores.num_layers = static_cast<int>(layers.size());
  protected_scores.num_kv_heads = layers.front().num_kv_heads;
  protected_scores.length = layers.front().length;
  // kvpress's FastKVzip compress_post is KVzip's: reuse its selection, with no sinks of its own
  // (ours are already at 1.0, the maximum of the gate's range).
  const KvzipMethod selection_rule(KvzipParams{.variant = KvzipVariant::kvzip,
                                               .layerwise = params_.layerwise,
                                               .n_sink = 0,
                                               .chunk_size = 2048});
  return selection_rule.select_from_scores(protected_scores, budget.compression,
                                           layers.front().model_is_bf16);
}

}  // namespace kvaudit::methods
