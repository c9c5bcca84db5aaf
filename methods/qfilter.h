// QFilterScorer: scores each key by its projection on a learned per-(layer, KV head) filter
// vector f_{ℓ,h} ∈ R^d:
//   s_h(j) = −⟨f_{ℓ,h}, k_j⟩            (k_j the post-RoPE key of position j in KV head h)
// and keeps the n_kept = max(1, floor(L(1−cr))) highest per KV head (ScorerMethod). The filters
// are the "Q-Filters" of Godey et al. 2025, "Q-Filters: Leveraging QK Geometry for Efficient KV
// Cache Compression", arXiv 2503.02812; kvpress 0.5.5 kvpress/presses/qfilter_press.py
// QFilterPress (the sign convention is kvpress's: the most negative projections are kept).
//
// Artefact (the `filters` path parameter): a safetensors file holding
//   q_filters  [num_layers, num_kv_heads, head_dim]  F32, F16 or BF16, finite,
// i.e. the model.safetensors of kvpress's hub repositories nthngdy/<model>_qfilt as downloaded
// (huggingface_hub PyTorchModelHubMixin; the parameter is named q_filters there). Its shape must
// equal the model's (checked on the first capture; the error names the file).
// Deviation: kvaudit cannot reach the hub; kvpress downloads the filters by model name.
// Numerics: as kvpress, the filter is first cast to the model dtype; in bf16 mode every product
// f_c·k_c is rounded to bf16 and the sum (accumulated in double) is rounded to bf16, the rounding
// points of kvpress's bf16 `(q_filter * keys).sum(-1)`; in f32 mode the sum is computed in double
// and rounded once to f32.
#pragma once

#include <string>
#include <vector>

#include "methods/artefact_files.h"
#include "methods/method.h"

namespace kvaudit::methods {

class QFilterScorer : public Scorer {
 public:
  // Reads and checks the file now (std::invalid_argument naming it on failure).
  explicit QFilterScorer(QFilterParams params);
  // From filters already in memory (tests): q_filters [layers, KV heads, head_dim] row-major;
  // `source` names them in errors.
  QFilterScorer(ArtefactTensor q_filters, std::string source);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  std::string name() const override { return "qfilter"; }

 private:
  std::string source_;
  ArtefactTensor filters_;  // [layers, KV heads, head_dim]
};

}  // namespace kvaudit::methods
