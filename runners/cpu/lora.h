// A PEFT LoRA adapter applied in the CPU forward (RestoreKV's restore pass, methods/restorekv.h):
// peft 0.21.2 tuners/lora/layer.py Linear.forward, with the adapter active,
//   y = W x (+ b)  then  y ← y + (B (A x)) · s
// computed in the adapter weights' dtype, which after kvpress's model.load_adapter is the model's:
// in a bf16 model the weights are bf16 (rounded on load) and A x, B(A x), the product with s and
// the sum are each rounded to bf16 (Rounding::bf16); in f32 nothing is rounded.
#pragma once

#include <span>

#include "methods/restorekv_artefacts.h"
#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

// The adapter as the model holds it: every A and B rounded to bf16 under Rounding::bf16 (a copy).
methods::LoraAdapter adapter_in_model_dtype(const methods::LoraAdapter& adapter, Rounding rounding);

// y [rows, out] += s · B (A x) for x [rows, in] (peft's rounding points, above).
void add_lora(std::span<const float> x, int rows, const methods::LoraModule& module, int rank,
              double scaling, Rounding rounding, std::span<float> y);

}  // namespace kvaudit::cpu
