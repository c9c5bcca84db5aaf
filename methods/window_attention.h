// Window attention shared by SnapKV, PyramidKV and TOVA: the attention of the last w queries
// before the boundary over all L keys, as kvpress `SnapKVPress.compute_window_attention` computes
// it (docs/design/kvpress.md §Window attention):
//   A_h(r, j) = softmax_j( q_{h,r}·k_{kv(h),j} / √d + mask ),  r = 0..w-1 at position L−w+r,
//   mask = −∞ for j > L−w+r (causal), softmax over all L keys in fp32.
// Dot products are accumulated in double and rounded to f32 (torch's f32 matmul rounds once per
// output too). In bf16 mode the logits are rounded to bf16 after the matmul and after the division
// (torch computes them in the model dtype) and the fp32 softmax is cast back to bf16.
#pragma once

#include <vector>

#include "methods/layer_capture.h"

namespace kvaudit::methods {

// [H, w, L] row-major; masked entries are 0. Assumes check_window(layer, w) passed.
std::vector<float> window_attention(const LayerCapture& layer, int window);

}  // namespace kvaudit::methods
