// LeverageScorer: approximate statistical leverage of the pre-RoPE keys under a right Gaussian
// sketch (Chari & Van Durme 2025, "Compactor: Calibrated Query-Agnostic KV Cache Compression with
// Approximate Leverage Scores", arXiv 2507.08143; kvpress 0.5.5
// kvpress/presses/leverage_press.py LeverageScorePress). Per layer and KV head, with K the
// pre-RoPE keys [n, d] (LayerCapture::keys_prerope) and Φ a Gaussian sketch [d, k] scaled by 1/√k
// (k = sketch_dimension):
//   X = (K − mean_rows K) Φ          [n, k]  sequence-centred, then sketched
//   G = XᵀX + λI                     λ = 1e-2 (kvpress's jitter; ×10 while the Cholesky fails)
//   ℓ(j) = max(0, x_jᵀ G⁻¹ x_j)      the ridge leverage of row j, through a Cholesky solve
//   z(j) = (ℓ(j) − mean ℓ) / max(std ℓ, 1e-6)   over every KV head and position (unbiased std)
// bf16 models: the mean, the centred keys and X are rounded to bf16 (kvpress computes them in the
// model dtype) and Φ is drawn in bf16; G, its Cholesky and ℓ are in double (kvpress: fp32).
//
// The sketch: kvpress draws Φ with torch.randn from torch's global RNG, a stream no other program
// reproduces, so kvpress's own kept sets can never be reproduced, only their distribution. Ours is
// Philox4x32-10 (Random123) keyed like methods/random.h by the study seed and the cell's
// selection key (no attention backend in it: sdpa and eager cells draw the same Φ):
//   key = (seed low, seed high), counter = (e, layer << 16 | 0x8000 | kv_head, cell_key low,
//   cell_key high) for entry e = row·k + column of Φ; Box–Muller on the first two words
//   (u1 = (w0 >> 8 + 1)·2⁻²⁴, u2 = (w1 >> 8)·2⁻²⁴, z = √(−2 ln u1)·cos 2πu2), Φ = f32(z)·f32(1/√k)
//   rounded to bf16 for bf16 models. The 0x8000 bit keeps these counters apart from RandomScorer's.
// Parity with kvpress is shown by injecting the sketches kvpress drew (SketchSource; the golden
// records them: tools/golden/kvpress_groups/queries.py), never by matching draws.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

// Test-only: Φ of a layer ([Hkv, d, k] row-major, already scaled by 1/√k) given explicitly, e.g.
// the parity test's recorded kvpress draws. Empty function: draw from Philox.
using SketchSource = std::function<std::vector<float>(const LayerCapture& layer)>;

// Φ of `layer` for the cell (see the header comment): [Hkv, d, k] row-major.
std::vector<float> draw_sketch(const LayerCapture& layer, int sketch_dimension,
                               const SelectionContext& context);

// ℓ(j) before the z-normalisation for the positions first..first+count-1 (CompactorPress scores
// a slice: the centring runs over the slice), [Hkv, count] row-major; `sketch` as draw_sketch's.
std::vector<float> leverage_scores(const LayerCapture& layer, int first, int count,
                                   std::span<const float> sketch, int sketch_dimension);

class LeverageScorer : public Scorer {
 public:
  explicit LeverageScorer(LeverageParams params, SketchSource injected_sketch = {});
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool scores_depend_on_cell() const override { return !injected_sketch_; }
  bool needs_all_queries() const override { return true; }
  std::string name() const override { return "leverage"; }

 private:
  LeverageParams params_;
  SketchSource injected_sketch_;
};

}  // namespace kvaudit::methods
