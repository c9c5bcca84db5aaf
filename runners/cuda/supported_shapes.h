// Which model shapes the CUDA engine's kernels exist for, checked when a CudaModel is built and
// before its weights are uploaded, so a model the engine cannot run is refused at once with its
// reason (model::ModelInputError: exit 1, like any unsupported model file), not at the first
// prefill after seconds of uploading.
//
// head_dim (d) per kernel, the dispatches these lists mirror:
//   prefill sdpa   16, 64, 128                    (attention/prefill_attention_sdpa.cu)
//   prefill eager  multiples of 16 in [16, 256]   (attention/prefill_attention_checks.cpp)
//   decode         16, 32, 64, 128, 256           (kernels/decode_attention.cu, both backends)
// A backend runs a model when both its prefill and the decode kernel take its d. Host code only.
#pragma once

#include <array>
#include <string>

#include "base/attention_backend.h"
#include "runners/model/model_config.h"

namespace kvaudit::cuda {

inline constexpr std::array<int, 3> kSdpaPrefillHeadDims{16, 64, 128};
inline constexpr std::array<int, 5> kDecodeHeadDims{16, 32, 64, 128, 256};

bool prefill_supports_head_dim(AttentionBackend backend, int head_dim);
bool decode_supports_head_dim(int head_dim);

// The head dims a CudaModel with `backend` runs, as text ("16, 64, 128").
std::string supported_head_dims_text(AttentionBackend backend);

// Throws model::ModelInputError naming the model's head_dim, the backend and the supported values
// when the CUDA engine has no kernel for it.
void require_cuda_supported(const model::ModelConfig& config, AttentionBackend backend);

}  // namespace kvaudit::cuda
