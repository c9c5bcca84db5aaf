// KvzapScorer (kvzap.h).
#include "methods/kvzap.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

// out[r] = round(W[r]·x + b[r]) for r < rows, W [rows, n] row-major; the sum in double, rounded
// once (to bf16 when `bf16`, with the weights and bias rounded to bf16 first, else to f32).
void linear(const std::vector<float>& weight, const std::vector<float>& bias, const float* x,
            std::size_t n, bool bf16, float* out) {
  const std::size_t rows = bias.size();
  for (std::size_t r = 0; r < rows; ++r) {
    const float* w = weight.data() + r * n;
    double sum = 0.0;
    for (std::size_t c = 0; c < n; ++c)
      sum += static_cast<double>(maybe_bf16(w[c], bf16)) * static_cast<double>(x[c]);
    sum += static_cast<double>(maybe_bf16(bias[r], bf16));
    out[r] = maybe_bf16(static_cast<float>(sum), bf16);
  }
}

float gelu(float u, bool bf16) {
  const double v = static_cast<double>(u);
  return maybe_bf16(static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))), bf16);
}

}  // namespace

std::vector<float> kvzap_scores(const KvzapLayer& surrogate, std::span<const float> attention_input,
                                int length, bool model_is_bf16) {
  const std::size_t d = to_size(surrogate.input_dim);
  const std::size_t m = to_size(surrogate.hidden_dim);
  const std::size_t kv_heads = to_size(surrogate.output_dim);
  if (length < 0 || attention_input.size() != to_size(length) * d)
    throw std::invalid_argument("kvzap: the attention input has " +
                                std::to_string(attention_input.size()) + " values, expected " +
                                std::to_string(length) + " positions × " + std::to_string(d));
  const auto positions = to_size(length);
  std::vector<float> scores(kv_heads * positions);
  std::vector<float> hidden(m);
  std::vector<float> out(kv_heads);
  for (std::size_t t = 0; t < positions; ++t) {
    const float* x = attention_input.data() + t * d;
    if (surrogate.type == KvzapModelType::linear) {
      linear(surrogate.w1, surrogate.b1, x, d, model_is_bf16, out.data());
    } else {
      linear(surrogate.w1, surrogate.b1, x, d, model_is_bf16, hidden.data());
      for (float& u : hidden) u = gelu(u, model_is_bf16);
      linear(surrogate.w2, surrogate.b2, hidden.data(), m, model_is_bf16, out.data());
    }
    for (std::size_t h = 0; h < kv_heads; ++h) scores[h * positions + t] = out[h];
  }
  return scores;
}

KvzapScorer::KvzapScorer(KvzapParams params)
    : KvzapScorer(read_kvzap_model(params.model), params.model) {}

KvzapScorer::KvzapScorer(std::vector<KvzapLayer> model, std::string source)
    : source_(std::move(source)), model_(std::move(model)) {
  if (model_.empty()) throw std::invalid_argument(source_ + ": the KVzap model has no layers");
}

void KvzapScorer::score(const LayerCapture& layer, const SelectionContext&,
                        std::span<float> scores) const {
  check_capture_basics(layer, name());
  const KvzapLayer& first = model_.front();
  if (static_cast<int>(model_.size()) != layer.num_layers ||
      first.output_dim != layer.num_kv_heads || first.input_dim != layer.hidden_size)
    throw std::invalid_argument(
        source_ + ": the KVzap model has " + std::to_string(model_.size()) + " layers, " +
        std::to_string(first.output_dim) + " outputs and input size " +
        std::to_string(first.input_dim) + " but the model has " + std::to_string(layer.num_layers) +
        " layers, " + std::to_string(layer.num_kv_heads) + " KV heads and hidden size " +
        std::to_string(layer.hidden_size) + " (the surrogate belongs to another model)");
  if (layer.layer < 0 || layer.layer >= layer.num_layers)
    throw std::invalid_argument(name() + ": layer index " + std::to_string(layer.layer) +
                                " outside the model's " + std::to_string(layer.num_layers));
  if (layer.attention_input.size() != to_size(layer.length) * to_size(layer.hidden_size))
    throw std::invalid_argument(
        name() + ": " + std::to_string(layer.attention_input.size()) +
        " attention-input values for length " + std::to_string(layer.length) + " × hidden " +
        std::to_string(layer.hidden_size) +
        " (was attention_input captured? the CPU capture records it; the CUDA capture does not: "
        "run kvzap with --device cpu)");
  const std::vector<float> s = kvzap_scores(model_[to_size(layer.layer)], layer.attention_input,
                                            layer.length, layer.model_is_bf16);
  if (scores.size() != s.size())
    throw std::invalid_argument(name() + ": score buffer of " + std::to_string(scores.size()) +
                                " for " + std::to_string(s.size()) + " scores");
  std::copy(s.begin(), s.end(), scores.begin());
}

}  // namespace kvaudit::methods
