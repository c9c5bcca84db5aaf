// KVzap: importance of every KV pair predicted from the layer's attention input by a small learned
// surrogate of KVzip's scores, one module per layer ("KVzap", arXiv 2601.07891; kvpress 0.5.5
// kvpress/presses/kvzap_press.py KVzapPress + KVzapModel, a ScorerPress).
//
// Per layer ℓ, position t < L and KV head h, with x_t ∈ R^D the input of the layer's self-attention
// (the input_layernorm output, LayerCapture::attention_input):
//   linear:  s_ℓ(h, t) = (W x_t + b)[h]                         W ∈ R^{Hkv×D}
//   mlp:     s_ℓ(h, t) = (W₂ GELU(W₁ x_t + b₁) + b₂)[h]        W₁ ∈ R^{M×D}, W₂ ∈ R^{Hkv×M}
//   GELU(u) = u·(1 + erf(u/√2))/2                              (torch nn.GELU(), exact)
// Selection: ScorerPress — each KV head keeps its n_kept = max(1, floor(L(1−cr))) highest scores
// (ScorerMethod; no protected window or sinks: kvpress has none for KVzap). Query visibility: the
// score reads only position t's own hidden state, so under the query-aware protocol it sees the
// question only as extra candidates, never as a query.
//
// Artefact (the `model` parameter): the surrogate's model.safetensors (methods/kvzap_model.h); its
// layer count, D and Hkv must equal the model's (checked on the first capture; the error names the
// file). kvpress downloads nvidia/KVzap-<linear|mlp>-<model name>; here the user names the file and
// its tensors decide linear vs mlp.
// Numerics: as kvpress, the module is cast to the model dtype. f32: each product sum in double,
// rounded once to f32, GELU in double rounded to f32. bf16: weights and biases rounded to bf16,
// every Linear output (sum in double, bias added, rounded once) and the GELU output rounded to bf16
// (torch's bf16 addmm and GELU round their results once).
// Deviations: kvpress pairs KVzap with DMSPress (threshold eviction with a sliding window, also
// while decoding); kvaudit runs it as the ratio ScorerPress kvpress also allows. CPU capture only
// (the CUDA capture does not download the attention input).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "methods/kvzap_model.h"
#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

// One layer's scores s(h, t), [Hkv, length], from attention_input [length, D]. Throws
// std::invalid_argument on a size mismatch.
std::vector<float> kvzap_scores(const KvzapLayer& surrogate, std::span<const float> attention_input,
                                int length, bool model_is_bf16);

class KvzapScorer : public Scorer {
 public:
  // Reads and checks the file now (std::invalid_argument naming it on failure).
  explicit KvzapScorer(KvzapParams params);
  // From a model already in memory (tests); `source` names it in errors.
  KvzapScorer(std::vector<KvzapLayer> model, std::string source);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool needs_attention_input() const override { return true; }
  bool scores_in_model_dtype() const override { return true; }
  bool per_entry() const override { return true; }
  std::string name() const override { return "kvzap"; }

 private:
  std::string source_;
  std::vector<KvzapLayer> model_;
};

}  // namespace kvaudit::methods
