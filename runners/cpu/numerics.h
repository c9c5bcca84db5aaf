// The CPU backend's names for the model-level rounding rules (runners/model/rounding.h): its
// kernels take a Rounding and round where HF rounds when the model computes in bf16.
#pragma once

#include "runners/model/rounding.h"

namespace kvaudit::cpu {

using model::round_all;
using model::round_as;
using model::Rounding;
using model::rounding_for;

}  // namespace kvaudit::cpu
