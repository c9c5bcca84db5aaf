// ggml block formats -> f32 (see dequantize.h for the layouts). The arithmetic mirrors ggml's
// dequantize_row_q8_0/q4_0/q4_1 and gguf-py's numpy reference: one f32 multiply (and, for Q4_1, a
// separate f32 add; kept as two statements so no compiler fuses them into an FMA).
#include "runners/model/formats/dequantize.h"

#include <cstring>
#include <string>

#include "runners/model/bf16.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

constexpr std::size_t kBlock = 32;  // QK8_0 = QK4_0 = QK4_1

std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v = 0;
  std::memcpy(&v, p, 2);
  return v;
}

void dequantize_q8_0(const std::uint8_t* src, std::size_t blocks, float* dst) {
  for (std::size_t b = 0; b < blocks; ++b, src += 34, dst += kBlock) {
    const float d = f16_bits_to_f32(load_u16(src));
    for (std::size_t j = 0; j < kBlock; ++j)
      dst[j] = static_cast<float>(static_cast<std::int8_t>(src[2 + j])) * d;
  }
}

void dequantize_q4_0(const std::uint8_t* src, std::size_t blocks, float* dst) {
  for (std::size_t b = 0; b < blocks; ++b, src += 18, dst += kBlock) {
    const float d = f16_bits_to_f32(load_u16(src));
    const std::uint8_t* qs = src + 2;
    for (std::size_t j = 0; j < kBlock / 2; ++j) {
      const int low = (qs[j] & 0x0F) - 8;
      const int high = (qs[j] >> 4) - 8;
      dst[j] = static_cast<float>(low) * d;
      dst[j + kBlock / 2] = static_cast<float>(high) * d;
    }
  }
}

void dequantize_q4_1(const std::uint8_t* src, std::size_t blocks, float* dst) {
  for (std::size_t b = 0; b < blocks; ++b, src += 20, dst += kBlock) {
    const float d = f16_bits_to_f32(load_u16(src));
    const float m = f16_bits_to_f32(load_u16(src + 2));
    const std::uint8_t* qs = src + 4;
    for (std::size_t j = 0; j < kBlock / 2; ++j) {
      const float low = static_cast<float>(qs[j] & 0x0F) * d;
      const float high = static_cast<float>(qs[j] >> 4) * d;
      dst[j] = low + m;
      dst[j + kBlock / 2] = high + m;
    }
  }
}

}  // namespace

bool dequantize_supported(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
      return true;
    default:
      return false;
  }
}

std::vector<float> dequantize_to_f32(GgmlType type, std::span<const std::uint8_t> bytes,
                                     std::uint64_t element_count, std::string_view what) {
  const std::string where(what);
  if (!dequantize_supported(type))
    throw ModelInputError(where + ": ggml type " + ggml_type_name(type) +
                          " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
  const GgmlTypeTraits traits = ggml_type_traits(type);
  if (element_count % traits.block_elements != 0)
    throw ModelInputError(where + ": " + std::to_string(element_count) +
                          " elements are not a whole number of " + std::string(traits.name) +
                          " blocks of " + std::to_string(traits.block_elements));
  const std::uint64_t blocks = element_count / traits.block_elements;
  std::uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<std::uint64_t>(traits.block_bytes),
                             &expected_bytes) ||
      expected_bytes != bytes.size())
    throw ModelInputError(where + ": " + std::to_string(element_count) + " " +
                          std::string(traits.name) + " elements need " +
                          std::to_string(expected_bytes) + " bytes, the data has " +
                          std::to_string(bytes.size()));
  std::vector<float> values(static_cast<std::size_t>(element_count));
  const std::uint8_t* src = bytes.data();
  const std::size_t n = values.size();
  switch (type) {
    case GgmlType::F32:
      if (n != 0) std::memcpy(values.data(), src, n * sizeof(float));
      break;
    case GgmlType::F16:
      for (std::size_t i = 0; i < n; ++i) values[i] = f16_bits_to_f32(load_u16(src + 2 * i));
      break;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < n; ++i) values[i] = bf16_bits_to_f32(load_u16(src + 2 * i));
      break;
    case GgmlType::Q8_0:
      dequantize_q8_0(src, static_cast<std::size_t>(blocks), values.data());
      break;
    case GgmlType::Q4_0:
      dequantize_q4_0(src, static_cast<std::size_t>(blocks), values.data());
      break;
    case GgmlType::Q4_1:
      dequantize_q4_1(src, static_cast<std::size_t>(blocks), values.data());
      break;
    default:
      break;  // rejected above
  }
  return values;
}

}  // namespace kvaudit::model
