// ggml tensor types as stored in GGUF files (ggml `include/ggml.h` enum ggml_type; block sizes from
// `src/ggml.c` type_traits / `src/ggml-common.h`). A tensor of type T with n elements along ne[0]
// occupies n / block_elements * block_bytes bytes per row; ne[0] must be a multiple of
// block_elements. Codes no longer defined by ggml (4, 5, 31-33, 36-38) are unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::model {

enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41
};

struct GgmlTypeTraits {
  std::string_view name;             // e.g. "Q4_1"
  std::uint32_t block_elements = 1;  // elements per block along ne[0]
  std::uint32_t block_bytes = 0;     // bytes per block
};

// Traits of a raw type code, or nullopt when the code is not a known ggml type.
std::optional<GgmlTypeTraits> ggml_type_traits(std::uint32_t code);
// Traits of a known type.
GgmlTypeTraits ggml_type_traits(GgmlType type);
// "Q4_1", or "unknown(<code>)".
std::string ggml_type_name(GgmlType type);

}  // namespace kvaudit::model
