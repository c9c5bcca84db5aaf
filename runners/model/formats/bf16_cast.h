// The bf16 cast of a loaded model, as transformers' torch_dtype=bfloat16 does it: every tensor's
// values rounded to the nearest bf16 (round-to-nearest-even) and config.dtype = bf16. Used for the
// manifest's `dtype = "bf16"` and by the CUDA backend's twin (the GPU holds exactly these values).
#pragma once

#include "runners/model/model_weights.h"

namespace kvaudit::model {

void cast_weights_to_bf16(ModelWeights& weights);

}  // namespace kvaudit::model
