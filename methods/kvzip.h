// KVzip: KV importance from context reconstruction. Kim et al. 2025, "KVzip: Query-Agnostic KV
// Cache Compression with Context Reconstruction", arXiv 2505.23416; kvpress 0.5.5
// kvpress/presses/kvzip_press.py KVzipPress (layerwise, n_sink = 4, kvzip_plus_normalization,
// chunk_size = 2048). Variant kvzip_plus = kvzip_plus_normalization=True (KVzip+).
//
// After the prefill of the b cached tokens c_0..c_{b-1}, the model reconstructs the context
// (an extra pass, methods/extra_pass.h). With p = the chat template's head length (PassPrompt::
// prefix_length), the context c_p..c_{b-1} is cut into chunks of chunk_size tokens; chunk i
// (cached positions [s_i, e_i)) is run on the cache of b tokens as
//   tokens_i = R_i ++ suffix ++ c_{s_i..e_i−1},   R_0 = "\n\nRepeat the previous context exactly.",
//   R_i = "\n\nRepeat the part of the previous context exactly, starting with" ++ the last 8
//   tokens of chunk i−1,
// at positions b, b+1, … (each chunk on a fresh copy: chunks never see each other). In every layer
// the chunk's T post-RoPE queries q_t attend over a SUBSET of keys: the n = min(n_sink, s_i) first
// cached keys, the chunk's own cached keys k_{s_i..e_i−1}, and the T keys of the chunk's tokens
// (causal among themselves):
//   a_h(t, ·) = softmax( q_{h,t} · k_· / √d )   over that subset (not over all b cached keys),
//   KVzip+:     a_h(t, j) ← a_h(t, j) / ‖x_t‖₂ · ‖W_O^{(h)} v_j‖₂
//               (x_t the attention input after input_layernorm; W_O^{(h)} head h's o_proj slice),
//   s_ℓ,g(j) = max over the chunk's rows t and the query heads h of KV group g of a_h(t, j),
//              for s_i ≤ j < e_i; 0 for every cached position not reconstructed (j < p).
// Then s(j) = max over everything + 1 for the n_sink first positions (kvpress compress_post) and,
// with N = n_layers·Hkv·b entries and cr the compression:
//   layerwise = false: P = int(N·cr) lowest of all layers' scores together (torch.topk(−s, P)),
//                      counted per layer as P_ℓ; layer ℓ then prunes its P_ℓ lowest over its
//                      Hkv·b entries;
//   layerwise = true:  every layer prunes its int(Hkv·b·cr) lowest over its Hkv·b entries.
// Heads keep different counts (as AdaKV). cr = 0 keeps everything. Ties: torch's CPU topk order
// (top_k.h) on the negated scores, as kvpress computes them.
//
// Numerics (model_is_bf16): each step is rounded to bf16 where kvpress's bf16 tensors are:
// q·k, ÷√d, the softmax output, ‖x_t‖, 1/‖x_t‖, the product, W_O v, its norm, the product, the
// scores and max + 1. In f32 nothing is rounded.
//
// Deviations: kvaudit evicts (kvpress masks, attention_patch.py); kvpress's chunk loop also runs a
// forward for an empty context (p ≥ b), which changes no score — we run none. The CUDA engine
// cannot run the pass (InferenceEngine::observed_pass refuses; the cell fails with that message).
// The reconstruction prompt's ids come from UnitTokens::pass_prompt (the unit's tokenizer).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

class KvzipMethod final : public Method, public ExtraPass {
 public:
  // Throws std::invalid_argument for n_sink < 0 or chunk_size < 1.
  explicit KvzipMethod(KvzipParams params);

  // Method
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  const ExtraPass* extra_pass() const override { return this; }
  std::string name() const override {
    return params_.variant == KvzipVariant::kvzip_plus ? "kvzip_plus" : "kvzip";
  }

  // ExtraPass (layerwise only changes the selection: it is not part of the key)
  std::string pass_key() const override;
  std::vector<PassChunk> chunks(std::span<const std::int32_t> cached_tokens,
                                const PassPrompt& prompt) const override;
  void observe(const LayerCapture& cached, const PassChunk& chunk, const PassLayerView& rows,
               ExtraPassResult& result) const override;

  // The kept sets from a pass's scores (select() without the capture checks): sinks protected,
  // then the budget rule above.
  Selection select_from_scores(const ExtraPassResult& scores, double compression,
                               bool model_is_bf16) const;

  // select() under another method's name (KVgrad reuses this selection): the capture and
  // pass-result checks, with messages naming `method`, then select_from_scores.
  // allow_full_compression: a compression of exactly 1 (every entry pruned) is accepted
  // (RestoreKV's budget-matched ratio reaches it).
  Selection select_named(std::span<const LayerCapture> layers, const Budget& budget,
                         const SelectionContext& context, const std::string& method,
                         bool allow_full_compression = false) const;

  const KvzipParams& params() const { return params_; }

 private:
  KvzipParams params_;
};

}  // namespace kvaudit::methods
