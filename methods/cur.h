// CurScorer: approximate leverage scores of the keys and values (CurDKV).
//   Per KV head: k2(j) = ‖K_j‖₂², v2(j) = ‖V_j‖₂² (post-RoPE keys, as cached).
//   use_local_approximation (default): the L positions are cut into windows of local_window_size
//     w (the last one padded with zeros) and each norm is divided by its window's sum:
//     k2(j) ← k2(j) / Σ_{i ∈ window(j)} k2(i), likewise v2.
//   leverage_type: key → s = k2; value → s = v2; kv_avg → s = (k2 + v2) / 2; kv_product (default)
//     → s = k2 · v2.
//   s(j) ← s(j) / Σ_i s(i) over the L positions of the head; the first num_sinks positions then
//   score 1 (above every normalised score unless one token holds all the mass).
// Citation: Sengupta et al. 2025, "Value-Guided KV Compression for LLMs via Approximated CUR
// Decomposition" (CurDKV), arXiv 2509.15038; kvpress 0.5.5 kvpress/presses/cur_press.py CURPress.
// Not offered: kvpress's use_random_leverage (a Gaussian projection to r = 20 dimensions drawn
// from torch's global RNG), whose draws no other program can reproduce.
// Precision: in bf16 mode every intermediate tensor kvpress holds in the model dtype is rounded to
// bf16 (the squares, the norms, the window-normalised norms, the combination and the final
// normalisation); sums accumulate in double (torch: fp32).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class CurScorer : public Scorer {
 public:
  explicit CurScorer(const CurParams& params);
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  std::string name() const override { return "cur"; }

 private:
  CurParams params_;
};

}  // namespace kvaudit::methods
