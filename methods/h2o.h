// H2O (Heavy-Hitter Oracle), prefill-time heavy + recent split from the UNNORMALISED attention
// column sums. Zhang et al. 2023, "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of
// Large Language Models", NeurIPS, arXiv 2306.14048; code FMInference/H2O @ac75c2a,
// h2o_hf/utils_hh/modify_llama.py `LlamaAttention_heavy_hitter.forward` l.122–163;
// docs/design/original-methods.md §H2O.
//
// Variant: the original generation-task code (utils_hh, used by run_text_generation.py), applied
// once at the end of prefill. Why this one: it is the paper's own heavy + recent split (scripts use
// heavy_ratio = recent_ratio = 0.1, i.e. 50/50), it acts on the prompt exactly when our cells
// evict, and the two prefill-time alternatives are already covered elsewhere (kvpress's normalised
// ObservedAttention is `observed_attention`; KVCache-Factory's H2OKVCluster keeps only an 8-token
// recent window and is "SnapKV-like" rather than 50/50). With f = heavy_fraction, r = 1 − cr:
//   s_k(j)  = mean over g ∈ group(k) of C_g(j),  C_h(j) = Σ_{i<L} A_h(i, j) (column_sums, no
//             division by L − j: the early-token bias of raw H2O is kept)
//   heavy   = int((f·r)·L), recent = int(((1 − f)·r)·L)   (heavy_ratio·L, recent_ratio·L, each
//             truncated, so heavy + recent may be one below floor(r·L))
//   kept_k  = the last `recent` positions ∪ the top `heavy` of s_k over positions 0..L−recent−1.
// Quirks: the original is MHA (one selection per query head); for GQA we select per KV head on the
// group mean (kvpress's convention). Not reproduced: the original builds its mask over L + 1 slots
// during generation, so its `recent` budget also counts the incoming decode token and prompt
// position L − recent is dropped; in a one-shot prefill eviction all `recent` slots go to prompt
// tokens. Decode-time re-selection (the original re-selects at every step) is outside the
// one-shot Method interface. cr = 0 keeps everything; if heavy + recent = 0 the last token is kept
// (kvpress PR #264's at-least-one rule). Ties go to the lower position (top_k.h).
#pragma once

#include <cstdint>

#include "methods/method.h"

namespace kvaudit::methods {

struct H2oSplit {
  std::int64_t heavy = 0;
  std::int64_t recent = 0;
};

// The heavy/recent counts for a prompt of `length` at `compression` with `heavy_fraction` f.
H2oSplit h2o_split(std::int64_t length, double compression, double heavy_fraction);

class H2oMethod : public Method {
 public:
  explicit H2oMethod(double heavy_fraction);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  bool needs_column_sums() const override { return true; }
  std::string name() const override { return "h2o"; }

 private:
  double heavy_fraction_;
};

}  // namespace kvaudit::methods
