// Rounding: where a model's forward rounds intermediate values to bf16.
//
// HF transformers running a bf16 checkpoint stores every intermediate tensor in bf16, so each op's
// fp32 result is rounded to bf16 (round-to-nearest-even) at fixed points of the decoder
// (docs/design/numerics.md lists them). Both engines compute in f32 registers and round at those
// points when the model computes in bf16 (Rounding::bf16); for f32 they round nowhere
// (Rounding::none), which is what HF does with an f32 model. Shared by the CPU backend and the
// host-side tables of the CUDA backend (rope_tables.h).
#pragma once

#include <span>

#include "runners/model/bf16.h"
#include "runners/model/model_config.h"

namespace kvaudit::model {

enum class Rounding { none, bf16 };

// The rounding mode HF uses for a model computing in `dtype`.
inline Rounding rounding_for(ComputeDtype dtype) {
  return dtype == ComputeDtype::bf16 ? Rounding::bf16 : Rounding::none;
}

// x, or x rounded to the nearest bf16 value (kept as f32).
inline float round_as(Rounding rounding, float x) {
  return rounding == Rounding::bf16 ? round_to_bf16(x) : x;
}

// Rounds every element in place (no-op for Rounding::none).
inline void round_all(Rounding rounding, std::span<float> values) {
  if (rounding != Rounding::bf16) return;
  for (float& v : values) v = round_to_bf16(v);
}

}  // namespace kvaudit::model
