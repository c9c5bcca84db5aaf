// ExtraPass::initial_result (extra_pass.h).
#include "methods/extra_pass.h"

#include <stdexcept>

namespace kvaudit::methods {

ExtraPassResult ExtraPass::initial_result(std::span<const LayerCapture> layers) const {
  if (layers.empty()) throw std::invalid_argument("extra pass: the capture has no layers");
  ExtraPassResult result;
  result.num_layers = static_cast<int>(layers.size());
  result.num_kv_heads = layers.front().num_kv_heads;
  result.length = layers.front().length;
  result.scores.assign(static_cast<std::size_t>(result.num_layers) *
                           static_cast<std::size_t>(result.num_kv_heads) *
                           static_cast<std::size_t>(result.length),
                       0.0f);
  return result;
}

}  // namespace kvaudit::methods
