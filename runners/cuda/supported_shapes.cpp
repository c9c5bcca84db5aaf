// What the CUDA kernels exist for; see supported_shapes.h.
#include "runners/cuda/supported_shapes.h"

#include <algorithm>

#include "runners/model/model_error.h"

namespace kvaudit::cuda {
namespace {

template <std::size_t N>
bool listed(const std::array<int, N>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

bool prefill_supports_head_dim(AttentionBackend backend, int head_dim) {
  if (backend == AttentionBackend::sdpa) return listed(kSdpaPrefillHeadDims, head_dim);
  return head_dim >= 16 && head_dim <= 256 && head_dim % 16 == 0;
}

bool decode_supports_head_dim(int head_dim) { return listed(kDecodeHeadDims, head_dim); }

std::string supported_head_dims_text(AttentionBackend backend) {
  std::string text;
  for (int d : kDecodeHeadDims) {
    if (!prefill_supports_head_dim(backend, d)) continue;
    if (!text.empty()) text += ", ";
    text += std::to_string(d);
  }
  return text;
}

void require_cuda_supported(const model::ModelConfig& config, AttentionBackend backend) {
  const int d = config.head_dim;
  if (prefill_supports_head_dim(backend, d) && decode_supports_head_dim(d)) return;
  const char* name = backend == AttentionBackend::sdpa ? "sdpa" : "eager";
  throw model::ModelInputError(
      "the CUDA engine has no " + std::string(name) + " attention kernels for head_dim " +
      std::to_string(d) + " (the model's head_dim; with " + name + " it runs " +
      supported_head_dims_text(backend) + "); run this model with --device cpu");
}

}  // namespace kvaudit::cuda
