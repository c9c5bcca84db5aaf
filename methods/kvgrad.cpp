// KvgradMethod (kvgrad.h): KVzip's reconstruction attention weighted by ‖W_O v‖ and the gradient
// norms of the pass, then KVzip's selection.
#include "methods/kvgrad.h"

#include <cstddef>
#include <stdexcept>
#include <string>

#include "methods/bf16_rounding.h"
#include "methods/reconstruction_attention.h"

namespace kvaudit::methods {
namespace {

KvzipParams kvgrad_reconstruction_params(const KvgradParams& p) {
  KvzipParams k;
  k.variant = KvzipVariant::kvzip;
  k.layerwise = p.layerwise;
  k.n_sink = p.n_sink;
  k.chunk_size = p.chunk_size;
  return k;
}

}  // namespace

KvgradMethod::KvgradMethod(KvgradParams params)
    : params_(params), reconstruction_(kvgrad_reconstruction_params(params)) {}

std::string KvgradMethod::pass_key() const {
  return "kvgrad: reconstruction + gradient; n_sink=" + std::to_string(params_.n_sink) +
         "; chunk_size=" + std::to_string(params_.chunk_size);
}

std::vector<PassChunk> KvgradMethod::chunks(std::span<const std::int32_t> cached_tokens,
                                            const PassPrompt& prompt) const {
  return reconstruction_.chunks(cached_tokens, prompt);
}

void KvgradMethod::observe(const LayerCapture& cached, const PassChunk& chunk,
                           const PassLayerView& rows, ExtraPassResult& result) const {
  if (rows.attention_output_gradient_norms.size() != static_cast<std::size_t>(rows.num_tokens)) {
    throw std::invalid_argument(
        "kvgrad: the reconstruction pass of layer " + std::to_string(cached.layer) +
        " carries no gradient norms (the engine must run the pass with its backward)");
  }
  const bool bf16 = cached.model_is_bf16;
  const int context = chunk.end - chunk.first;
  const std::vector<float> value_norm = chunk_value_output_norms(cached, chunk, name());
  const std::span<const float> gradient_norm = rows.attention_output_gradient_norms;
  fold_reconstruction_attention(
      cached, chunk, rows, params_.n_sink,
      [&](int h, int t, std::span<float> a) {
        const float* norms =
            value_norm.data() + static_cast<std::size_t>(h) * static_cast<std::size_t>(context);
        const float gradient = gradient_norm[static_cast<std::size_t>(t)];
        // f32 gradient norm; kvpress stores the product in score_val's dtype (bf16 rounding is
        // monotone, so rounding before the max equals rounding after it).
        for (std::size_t j = 0; j < a.size(); ++j)
          a[j] = maybe_bf16(maybe_bf16(a[j] * norms[j], bf16) * gradient, bf16);
      },
      name(), result);
}

Selection KvgradMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                               const SelectionContext& context) const {
  return reconstruction_.select_named(layers, budget, context, name());
}

}  // namespace kvaudit::methods
