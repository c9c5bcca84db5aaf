// dequantize_to_f32 on hand-built blocks: the element order within a block (low nibbles are
// elements 0-15, high nibbles 16-31), the scale/minimum formulas, and the errors for unsupported
// types and wrong sizes. Bit-exact agreement with gguf-py is checked in gguf_test.cpp.
#include "runners/model/formats/dequantize.h"

#include <gtest/gtest.h>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

constexpr std::uint16_t kHalfOfOne = 0x3800;  // f16 0.5
constexpr std::uint16_t kF16Two = 0x4000;     // f16 2.0
constexpr std::uint16_t kF16MinusOne = 0xbc00;

std::vector<std::uint8_t> u16_bytes(std::uint16_t v) {
  return {static_cast<std::uint8_t>(v & 0xff), static_cast<std::uint8_t>(v >> 8)};
}

TEST(Dequantize, Q8_0ScalesSignedBytes) {
  Bytes b;
  b.raw(u16_bytes(kHalfOfOne));
  for (int j = 0; j < 32; ++j) b.u8(static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16)));
  const auto values = dequantize_to_f32(GgmlType::Q8_0, b.data(), 32, "t");
  for (int j = 0; j < 32; ++j) EXPECT_EQ(values[j], 0.5f * static_cast<float>(j - 16)) << j;
}

TEST(Dequantize, Q4_0LowNibblesFirstThenHighNibbles) {
  Bytes b;
  b.raw(u16_bytes(kF16Two));
  for (int j = 0; j < 16; ++j) b.u8(static_cast<std::uint8_t>((15 - j) << 4 | j));
  const auto values = dequantize_to_f32(GgmlType::Q4_0, b.data(), 32, "t");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(values[j], 2.0f * static_cast<float>(j - 8)) << "element " << j;
    EXPECT_EQ(values[j + 16], 2.0f * static_cast<float>(15 - j - 8)) << "element " << j + 16;
  }
}

TEST(Dequantize, Q4_1AddsTheMinimum) {
  Bytes b;
  b.raw(u16_bytes(kHalfOfOne)).raw(u16_bytes(kF16MinusOne));
  for (int j = 0; j < 16; ++j) b.u8(static_cast<std::uint8_t>(3 << 4 | j));
  // Two blocks: the second is all zeros (d = m = 0).
  b.zeros(20);
  const auto values = dequantize_to_f32(GgmlType::Q4_1, b.data(), 64, "t");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(values[j], 0.5f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(values[j + 16], 0.5f * 3.0f - 1.0f);
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(values[j], 0.0f);
}

TEST(Dequantize, Bf16AndF16WidenExactly) {
  Bytes b;
  b.raw(u16_bytes(0x3fc0)).raw(u16_bytes(0xc000));  // bf16 1.5, -2.0
  EXPECT_EQ(dequantize_to_f32(GgmlType::BF16, b.data(), 2, "t"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(dequantize_to_f32(GgmlType::F16, b.data(), 2, "t"),
            (std::vector<float>{1.9375f, -2.0f}));  // f16 0x3fc0 = 1 + 0x3c0/1024
}

TEST(Dequantize, UnsupportedTypeNamesTensorAndType) {
  const std::vector<std::uint8_t> bytes(210);
  expect_model_error(
      [&] { (void)dequantize_to_f32(GgmlType::Q6_K, bytes, 256, "m.gguf: tensor 'blk.0.x'"); },
      {"m.gguf: tensor 'blk.0.x'", "ggml type Q6_K", "not supported"});
  EXPECT_FALSE(dequantize_supported(GgmlType::Q5_1));
  EXPECT_TRUE(dequantize_supported(GgmlType::Q4_1));
}

TEST(Dequantize, SizeMismatchesAreRejected) {
  const std::vector<std::uint8_t> bytes(33);
  expect_model_error([&] { (void)dequantize_to_f32(GgmlType::Q8_0, bytes, 32, "t 'q'"); },
                     {"t 'q'", "need 34 bytes", "has 33"});
  expect_model_error([&] { (void)dequantize_to_f32(GgmlType::Q8_0, bytes, 31, "t 'q'"); },
                     {"t 'q'", "not a whole number of Q8_0 blocks"});
}

}  // namespace
}  // namespace kvaudit::model::test
