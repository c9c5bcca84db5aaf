// KVgrad: KV importance from input × gradient attribution on KVzip's context reconstruction.
// "KVgrad" (OpenReview cg1wTCJjjk); kvpress 0.5.5 kvpress/presses/kvgrad_press.py KVgradPress
// (a KVzipPress: layerwise, n_sink = 4; chunk_size = 512; no KVzip+ normalisation).
//
// The reconstruction pass is KVzip's (methods/kvzip.h: the same chunks, prompts and positions;
// each chunk on a fresh copy of the prefilled cache). For a chunk with T rows p, let a_p^ℓ be the
// residual stream after layer ℓ's attention block and
//   Φ = Σ_p ‖h_p^L‖²   (h^L: the last decoder layer's output, before the final norm; the cached
//                       entries are constants, the rows' own keys and values are not),
// computed by a backward pass through the decoder (runners/cpu/attention_output_gradients.h).
// Every cached entry c of the chunk gets, per layer ℓ and KV group g,
//   S_ℓ,g(c) = max over rows p and query heads h of g of
//              A_h(p, c) · ‖W_O^{(h)} v_c‖₂ · ‖∂Φ/∂a_p^ℓ‖₂
// with A the reconstruction attention over KVzip's key subset (methods/reconstruction_attention.h;
// the product in that order). Positions below the template head are 0; then, exactly as KVzip,
// the n_sink first positions get max + 1 and the global (or layer-wise) bottom-int(N·cr) entries
// are evicted (KvzipMethod::select_from_scores). Heads keep different counts.
//
// Numerics: f32 models are matched (the gradient in f32, as torch's f32 autograd; sums in another
// order: 1e-6 relative). In bf16 kvpress rounds A and A·‖W_O v‖ to bf16, multiplies by the f32
// gradient norm and stores the score in bf16 — kvaudit does the same rounding but back-propagates
// in f32 where kvpress's autograd runs in bf16, so bf16 scores are close, not equal.
// Deviations: kvaudit evicts (kvpress masks). Only the CPU engine runs the pass
// (InferenceEngine::observed_pass; the CUDA engine refuses and the cell fails with that message).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/kvzip.h"
#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

class KvgradMethod final : public Method, public ExtraPass {
 public:
  // Throws std::invalid_argument for n_sink < 0 or chunk_size < 1.
  explicit KvgradMethod(KvgradParams params);

  // Method
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  const ExtraPass* extra_pass() const override { return this; }
  std::string name() const override { return "kvgrad"; }

  // ExtraPass (layerwise only changes the selection: it is not part of the key)
  std::string pass_key() const override;
  bool needs_attention_output_gradients() const override { return true; }
  std::vector<PassChunk> chunks(std::span<const std::int32_t> cached_tokens,
                                const PassPrompt& prompt) const override;
  void observe(const LayerCapture& cached, const PassChunk& chunk, const PassLayerView& rows,
               ExtraPassResult& result) const override;

  const KvgradParams& params() const { return params_; }

 private:
  KvgradParams params_;
  KvzipMethod reconstruction_;  // KVzip with the same n_sink, chunk_size and layerwise
};

}  // namespace kvaudit::methods
