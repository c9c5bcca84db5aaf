// Layer-DefensiveKV: DefensiveKV's per-layer scores (defensive_scoring.h) selected with ONE budget
// across all layers. Source: FFY0/DefensiveKV @9251b95,
// kvpress/presses/efficient_ada_global_scorer_press.py `compress` (l.123) and `layer_compress`
// (l.44), registry name `efficient_layer_defensivekv`; Feng et al. 2025, arXiv 2510.13334;
// docs/design/original-methods.md §Layer-DefensiveKV selection.
//
//   N_tot  = int(L·(1 − cr)·Hkv·n_layers)           (Python float product, truncated)
//   global = top N_tot of all layers' flattened scores concatenated (layer-major, n_layers·Hkv·L)
//   B_ℓ    = the number of global picks in layer ℓ; layer ℓ then keeps its top B_ℓ scores over
//            its Hkv·L entries (head budgets adaptive inside the layer).
// Quirks reproduced: scores are compared RAW across layers (only ν normalises); window and stage-1
// tokens carry their layer-local protection value M, so a layer with a small M can lose its window;
// a layer may get B_ℓ = 0 (every head empty). With our deterministic tie-break (lower flat index of
// the concatenation wins, top_k.h) the per-layer re-selection reproduces the global choice exactly;
// the original's two torch.topk calls agree only up to ties. cr = 0 keeps everything.
#pragma once

#include <cstdint>
#include <vector>

#include "methods/method.h"

namespace kvaudit::methods {

class LayerDefensiveKvMethod : public Method {
 public:
  explicit LayerDefensiveKvMethod(int window);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return window_; }
  std::string name() const override { return "layer_defensivekv"; }

  // B_ℓ: the kept entries of each layer (Σ over its heads) under `budget`, from the same scores
  // select() uses.
  std::vector<std::int64_t> layer_budgets(std::span<const LayerCapture> layers,
                                          const Budget& budget) const;

 private:
  int window_;
};

}  // namespace kvaudit::methods
