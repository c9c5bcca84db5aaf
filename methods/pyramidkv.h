// PyramidKvMethod: SnapKV scores (kvpress variant) with a pyramidal per-layer budget (Cai et al.
// 2024, "PyramidKV: Dynamic KV Cache Compression based on Pyramidal Information Funneling";
// kvpress PyramidKVPress 0.5.5, docs/design/kvpress.md §PyramidKVPress), in double with Python's
// round (half to even, std::nearbyint under the default rounding mode):
//   cap = w + L(1−cr);  min = (cap−w)/β;  max = 2(cap−w) − min
//   if max ≥ L−w: max = L−w, min = 2(cap−w) − max
//   if not (L ≥ max ≥ min ≥ w): n_kept = max(1, round(L(1−cr)))             (SnapKV fallback)
//   else n_kept(ℓ) = round(max − ℓ·(max−min)/(n_layers−1))   (steps = 0 for one layer)
// Each KV head of layer ℓ keeps its n_kept(ℓ) highest SnapKV scores. kvpress always applies cr
// (the original KVCache-Factory skips compression when L < C; docs/design/original-methods.md
// §SnapKV, PyramidKV and StreamingLLM).
#pragma once

#include "methods/method.h"
#include "methods/snapkv.h"

namespace kvaudit::methods {

// Parameters: PyramidKvParams (method_params.h).

// n_kept(ℓ) of the formula above.
std::int64_t pyramid_layer_budget(std::int64_t length, double compression, int window, int beta,
                                  int layer, int num_layers);

class PyramidKvMethod : public Method {
 public:
  explicit PyramidKvMethod(PyramidKvParams params);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override { return params_.window; }
  std::string name() const override { return "pyramidkv"; }

 private:
  PyramidKvParams params_;
  SnapKvScorer scorer_;
};

}  // namespace kvaudit::methods
