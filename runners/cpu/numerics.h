// Rounding: where the CPU backend rounds intermediate values to bf16.
//
// HF transformers running a bf16 checkpoint stores every intermediate tensor in bf16, so each op's
// fp32 result is rounded to bf16 (round-to-nearest-even) at the points listed in
// ../shared/reference/inference-anchors.md §2.9. The CPU backend computes in f32 and emulates those
// roundings when the checkpoint is bf16 (Rounding::bf16); for f32 checkpoints it rounds nowhere
// (Rounding::none), which is what HF does with an f32 model.
#pragma once

#include <span>

#include "runners/model/bf16.h"
#include "runners/model/model_config.h"

namespace kvaudit::cpu {

enum class Rounding { none, bf16 };

// The rounding mode HF uses for a checkpoint of this dtype.
inline Rounding rounding_for(model::ComputeDtype dtype) {
  return dtype == model::ComputeDtype::bf16 ? Rounding::bf16 : Rounding::none;
}

// x, or x rounded to the nearest bf16 value (kept as f32).
inline float round_as(Rounding rounding, float x) {
  return rounding == Rounding::bf16 ? model::round_to_bf16(x) : x;
}

// Rounds every element in place (no-op for Rounding::none).
inline void round_all(Rounding rounding, std::span<float> values) {
  if (rounding != Rounding::bf16) return;
  for (float& v : values) v = model::round_to_bf16(v);
}

}  // namespace kvaudit::cpu
