// argmax_token: the greedy choice over one row of logits, shared by both devices' decoding.
#pragma once

#include <cstdint>
#include <span>

namespace kvaudit {

// Index of the largest logit; ties go to the lowest id, and a NaN counts as the largest value
// (first NaN wins), like torch.argmax. Throws std::invalid_argument for an empty span.
std::int32_t argmax_token(std::span<const float> logits);

}  // namespace kvaudit
