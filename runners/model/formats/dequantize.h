// Conversion of ggml tensor data to f32 (ggml `src/ggml-quants.c` dequantize_row_*,
// `src/ggml-common.h` block layouts; docs/design/numerics.md §GGUF).
// Blocks hold QK = 32 consecutive elements along ne[0]:
//   Q8_0 (34 B): f16 d, i8 qs[32]          x[j] = d * qs[j]
//   Q4_0 (18 B): f16 d, u8 qs[16]          x[j] = ((qs[j] & 0xF) - 8) * d,
//                                          x[j+16] = ((qs[j] >> 4) - 8) * d
//   Q4_1 (20 B): f16 d, f16 m, u8 qs[16]   x[j] = (qs[j] & 0xF) * d + m,
//                                          x[j+16] = (qs[j] >> 4) * d + m
// (low nibbles are elements 0-15, high nibbles 16-31). F32 is copied, F16/BF16 widened exactly.
// The arithmetic is done in f32 exactly as ggml (and gguf-py's numpy reference) does it, so the
// result is bit-identical to `gguf.quants.dequantize`.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runners/model/formats/ggml_types.h"

namespace kvaudit::model {

// True for the types dequantize_to_f32 handles: F32, F16, BF16, Q8_0, Q4_0, Q4_1.
bool dequantize_supported(GgmlType type);

// Converts `element_count` elements stored as `type` in `bytes` to f32. `what` names the tensor in
// messages (e.g. "model.gguf: tensor 'blk.0.attn_q.weight'"). Throws ModelInputError when the type
// is not supported, element_count is not a multiple of the block size, or bytes.size() is not
// exactly the size the elements need.
std::vector<float> dequantize_to_f32(GgmlType type, std::span<const std::uint8_t> bytes,
                                     std::uint64_t element_count, std::string_view what);

}  // namespace kvaudit::model
