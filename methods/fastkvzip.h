// FastKVzip: KVzip-style KV importance predicted by small trained gates, one per layer, from the
// layer's attention input (no reconstruction pass). Jang-Hyun Kim, Dongyoon Han, Sangdoo Yun,
// "Fast KVzip", arXiv 2601.17668 (official code github.com/Janghyun1230/FastKVzip);
// kvpress 0.5.5 kvpress/presses/fastkvzip_press.py
// FastKVzipPress + FastKVzipGate (layerwise, n_sink = 4, window_size = 4096, window_ratio = 0.02).
//
// Gate of layer ℓ (o = output dim, Hkv heads, G = H/Hkv query groups, S gate sinks, D = hidden):
// x_t ∈ R^D is the input of the layer's self-attention (the input_layernorm output, LayerCapture::
// attention_input) of position t < L. Per KV head h and group g:
//   q_{h,g,t} = N_q( (W_q x_t + β)[(h·G + g)·o .. +o] ),   k_{h,t} = N_k( (W_k x_t)[h·o .. +o] ),
//   N(v) = w ⊙ v / sqrt(mean(v²) + 1e-6)                   (an RMSNorm with weight w ∈ R^o),
//   z_{h,g,t}   = k_{h,t} · q_{h,g,t} / √o + b_{h,g},
//   z⁰_{h,g,t,s} = k̂_{h,s} · q_{h,g,t} / √o              (s < S: the gate's learned sink keys k̂),
//   σ_{h,g,t}   = 1 / (1 + Σ_s exp(z⁰_{h,g,t,s} − z_{h,g,t})),
//   s_ℓ(h, t)   = mean over g of σ_{h,g,t}                  (∈ (0, 1]).
// Then s_ℓ(h, t) = 1 for t < n_sink and for the last w positions, w = max(1, int(L·window_ratio))
// when L < 32000, else w = window_size. Selection: kvpress's KVzip compress_post (methods/kvzip.h):
// with N = n_layers·Hkv·L entries and cr the compression,
//   layerwise = false: the int(N·cr) lowest of all layers' scores together, counted per layer as
//                      P_ℓ; layer ℓ then prunes its P_ℓ lowest over its Hkv·L entries;
//   layerwise = true:  every layer prunes its int(Hkv·L·cr) lowest.
// Heads keep different counts (as AdaKV). cr = 0 keeps everything. Ties: torch's CPU topk
// (top_k.h) on the negated scores.
//
// Numerics: everything is f32 except, for a bf16 model, the two projections, which round to bf16
// (kvpress's gates then hold bf16 weights, as a bf16 input requires), and the normalised vector,
// which is rounded to bf16 before the (f32) RMSNorm weight multiplies it — Qwen3RMSNorm's cast
// back to the input dtype. σ, the mean and the protected 1.0 are f32 in kvpress too.
//
// Gates file (the `gates` parameter): safetensors with kvpress's FastKVzipGate.state_dict() tensors
// per layer, prefixed by the layer index (methods/fastkvzip_gates.h). kvpress downloads
// Jang-Hyun/Fast-KVzip/<model>/q<G>_dim16_sink16.pt, a torch pickle whose ["module"] is that list
// of state dicts; converting it is one line (docs/METHODS.md).
// The file's own consistency is checked at plan time (check_fastkvzip_gates_file); its layers,
// Hkv, G and D against the model when a capture is seen.
//
// Deviations: kvaudit evicts (kvpress masks, attention_patch.py). kvpress's Gemma3 special case
// (sliding layers get no gate) is not reproduced: every layer needs a gate. The window_size
// branch (L ≥ 32000) is kvpress's switch to its chunked-prefill window; kvaudit prefills at once.
// CPU capture only (the CUDA capture does not download the attention input).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "methods/fastkvzip_gates.h"
#include "methods/method.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

// The gate's σ means s(h, t) for t < length, [Hkv, length] (before sinks and window), from
// attention_input [length, D]. Throws std::invalid_argument on a size mismatch.
std::vector<float> fastkvzip_gate_scores(const FastKvzipGate& gate,
                                         std::span<const float> attention_input, int length,
                                         bool model_is_bf16);

// The protected window w for a context of `length` (see above).
std::int64_t fastkvzip_window(const FastKvzipParams& params, std::int64_t length);

class FastKvzipMethod final : public Method {
 public:
  // Throws std::invalid_argument for n_sink < 0, window_size < 1 or window_ratio outside [0, 1].
  // The gates file is read at the first select() (and kept).
  explicit FastKvzipMethod(FastKvzipParams params);
  // With gates already in memory (tests).
  FastKvzipMethod(FastKvzipParams params, std::vector<FastKvzipGate> gates);

  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  bool needs_attention_input() const override { return true; }
  std::string name() const override { return "fastkvzip"; }

  // The protected scores of every layer, [layers, Hkv, L] (select() without the budget rule).
  std::vector<float> scores(std::span<const LayerCapture> layers) const;

  const FastKvzipParams& params() const { return params_; }

 private:
  const std::vector<FastKvzipGate>& gates() const;

  FastKvzipParams params_;
  mutable std::mutex gates_mutex_;
  mutable std::shared_ptr<const std::vector<FastKvzipGate>> gates_;
};

}  // namespace kvaudit::methods
