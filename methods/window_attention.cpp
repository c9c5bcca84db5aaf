// Window attention (window_attention.h).
#include "methods/window_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "methods/bf16_rounding.h"

namespace kvaudit::methods {

std::vector<float> window_attention(const LayerCapture& layer, int window) {
  const auto H = static_cast<std::size_t>(layer.num_heads);
  const auto L = static_cast<std::size_t>(layer.length);
  const auto d = static_cast<std::size_t>(layer.head_dim);
  const auto w = static_cast<std::size_t>(window);
  const auto rows = static_cast<std::size_t>(layer.window_rows);
  const bool bf16 = layer.model_is_bf16;
  const auto scale = static_cast<float>(std::sqrt(static_cast<double>(layer.head_dim)));
  std::vector<float> attn(H * w * L, 0.0f);
  std::vector<float> logits(L);
  for (std::size_t h = 0; h < H; ++h) {
    const auto kv = static_cast<std::size_t>(layer.kv_head_of(static_cast<int>(h)));
    const float* keys = layer.keys[kv].data();
    for (std::size_t r = 0; r < w; ++r) {
      const float* q = layer.window_queries.data() + (h * rows + (rows - w + r)) * d;
      const std::size_t last = L - w + r;  // the query's own position: sees keys 0..last
      float row_max = -INFINITY;
      for (std::size_t j = 0; j <= last; ++j) {
        double dot = 0.0;
        for (std::size_t c = 0; c < d; ++c)
          dot += static_cast<double>(q[c]) * static_cast<double>(keys[j * d + c]);
        const float logit = maybe_bf16(maybe_bf16(static_cast<float>(dot), bf16) / scale, bf16);
        logits[j] = logit;
        row_max = std::max(row_max, logit);
      }
      double sum = 0.0;
      for (std::size_t j = 0; j <= last; ++j) {
        const auto e = static_cast<float>(std::exp(static_cast<double>(logits[j] - row_max)));
        logits[j] = e;
        sum += e;
      }
      float* out = attn.data() + (h * w + r) * L;
      for (std::size_t j = 0; j <= last; ++j)
        out[j] = maybe_bf16(static_cast<float>(static_cast<double>(logits[j]) / sum), bf16);
    }
  }
  return attn;
}

}  // namespace kvaudit::methods
