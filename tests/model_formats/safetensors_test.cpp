// SafetensorsFile: the golden file written by the safetensors package (dtypes, shapes, values and
// __metadata__ bit-exact), and malformed headers built byte by byte, each rejected with a message
// naming the file and the field.
#include "runners/model/formats/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(SafetensorsGolden, DtypesShapesValuesAndMetadata) {
  const auto path = golden_dir() / "dtypes.safetensors";
  const auto expected = read_json(golden_dir() / "dtypes.json");
  const SafetensorsFile file = SafetensorsFile::open(path);
  using StringMap = std::map<std::string, std::string>;
  EXPECT_EQ(file.metadata(), expected["metadata"].get<StringMap>());
  ASSERT_EQ(file.names().size(), expected["tensors"].size());
  for (const auto& [name, entry] : expected["tensors"].items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(file.contains(name));
    const auto& info = file.info(name);
    EXPECT_EQ(safetensors_dtype_name(info.dtype), entry["dtype"].get<std::string>());
    EXPECT_EQ(info.shape, entry["shape"].get<std::vector<std::int64_t>>());
    if (!entry.contains("values")) continue;
    const auto values = file.to_f32(name);
    const auto want = entry["values"].get<std::vector<double>>();
    ASSERT_EQ(values.size(), want.size());
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(values[i], static_cast<float>(want[i])) << "element " << i;  // bit-exact widening
  }
  EXPECT_EQ(file.info("scalar").element_count(), 1u);
  EXPECT_TRUE(file.info("scalar").shape.empty());
  EXPECT_EQ(file.info("empty").element_count(), 0u);
  EXPECT_EQ(file.data_offset() % 8, 0u);  // the Rust writer pads the header to 8 bytes
}

TEST(SafetensorsGolden, NonFloatDtypeIsRejectedOnConversion) {
  const auto path = golden_dir() / "dtypes.safetensors";
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.raw("i32").size(), 16u);
  expect_model_error([&] { (void)file.to_f32("i32"); }, {path.string(), "'i32'", "I32"});
  expect_model_error([&] { (void)file.info("nope"); }, {path.string(), "'nope'", "missing"});
}

TEST(SafetensorsParse, PaddedHeaderAndEmptyFileOfTensors) {
  const auto bytes = safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}    )",
      {0, 0, 128, 63, 0, 0, 0, 64});
  const auto file = SafetensorsFile::parse(bytes, "mem.safetensors");
  EXPECT_EQ(file.to_f32("a"), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(file.metadata().at("k"), "v");
  const auto empty = safetensors_bytes("{}", {});
  EXPECT_TRUE(SafetensorsFile::parse(empty, "empty.safetensors").names().empty());
}

TEST(SafetensorsParse, Bf16AndF16AreWidenedExactly) {
  // bf16 0x3fc0 = 1.5, f16 0x3c00 = 1.0, f16 0x0001 = 2^-24 (subnormal).
  const auto bytes = safetensors_bytes(R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},)"
                                       R"("h":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
                                       {0xc0, 0x3f, 0x00, 0x3c, 0x01, 0x00});
  const auto file = SafetensorsFile::parse(bytes, "mem.safetensors");
  EXPECT_EQ(file.to_f32("b"), std::vector<float>{1.5f});
  EXPECT_EQ(file.to_f32("h"), (std::vector<float>{1.0f, std::ldexp(1.0f, -24)}));
}

// ---- malformed files (each written to disk so the message must carry the path) ----

class SafetensorsMalformed : public ::testing::Test {
 protected:
  void expect_rejected(const std::vector<std::uint8_t>& bytes,
                       std::initializer_list<std::string> parts) {
    const auto path = write_file(scratch_dir() / "bad.safetensors", bytes);
    std::vector<std::string> all{path.string()};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      (void)SafetensorsFile::open(path);
      ADD_FAILURE() << "expected a ModelInputError";
    } catch (const ModelInputError& e) {
      for (const auto& part : all)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "missing '" << part << "' in: " << e.what();
    }
  }
};

TEST_F(SafetensorsMalformed, TruncatedHeaderLength) {
  expect_rejected({1, 2, 3}, {"header length", "truncated"});
}

TEST_F(SafetensorsMalformed, HeaderLengthBeyondFile) {
  Bytes b;
  b.u64(1000).raw("{}");
  expect_rejected(b.data(), {"header length 1000", "beyond the end of the file"});
}

TEST_F(SafetensorsMalformed, HeaderLengthOverLimit) {
  Bytes b;
  b.u64(100'000'001).raw("{}");
  expect_rejected(b.data(), {"header length 100000001", "exceeds the limit"});
}

TEST_F(SafetensorsMalformed, BadJson) {
  expect_rejected(safetensors_bytes(R"({"a": {"dtype": "F32",)", {}), {"header", "invalid JSON"});
}

TEST_F(SafetensorsMalformed, HeaderNotAnObject) {
  expect_rejected(safetensors_bytes(R"( {})", {}), {"header", "must start with '{'"});
}

TEST_F(SafetensorsMalformed, OffsetsOutsideBuffer) {
  expect_rejected(safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::vector<std::uint8_t>(8)),
                  {"tensor 'w'", "data_offsets", "[4, 12)", "outside the data buffer of 8 bytes"});
}

TEST_F(SafetensorsMalformed, OverlappingTensors) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    std::vector<std::uint8_t>(12)),
                  {"tensor 'b'", "data_offsets", "overlaps tensor 'a'"});
}

TEST_F(SafetensorsMalformed, HoleBetweenTensors) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                    std::vector<std::uint8_t>(12)),
                  {"tensor 'b'", "data_offsets", "hole", "[4, 8)"});
}

TEST_F(SafetensorsMalformed, TrailingBytesAfterLastTensor) {
  expect_rejected(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                    std::vector<std::uint8_t>(6)),
                  {"data buffer", "[4, 6)", "belong to no tensor"});
}

TEST_F(SafetensorsMalformed, ShapeSizeMismatch) {
  expect_rejected(safetensors_bytes(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})",
                                    std::vector<std::uint8_t>(8)),
                  {"tensor 'w'", "shape [2, 3]", "BF16", "needs 12 bytes", "spans 8"});
}

TEST_F(SafetensorsMalformed, ShapeOverflow) {
  expect_rejected(
      safetensors_bytes(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", {}),
      {"tensor 'w'", "shape", "overflows"});
}

TEST_F(SafetensorsMalformed, NegativeShape) {
  expect_rejected(
      safetensors_bytes(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", {}),
      {"tensor 'w'", "field 'shape'", "non-negative integers"});
}

TEST_F(SafetensorsMalformed, UnknownDtype) {
  expect_rejected(safetensors_bytes(R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})",
                                    std::vector<std::uint8_t>(4)),
                  {"tensor 'w'", "field 'dtype'", "unknown dtype 'F17'"});
}

TEST_F(SafetensorsMalformed, DuplicateTensorName) {
  expect_rejected(safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                    std::vector<std::uint8_t>(8)),
                  {"header", "duplicate key 'w'"});
}

TEST_F(SafetensorsMalformed, MissingField) {
  expect_rejected(safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1]}})", {}),
                  {"tensor 'w'", "field 'data_offsets' is missing"});
}

TEST_F(SafetensorsMalformed, MetadataValueNotAString) {
  expect_rejected(safetensors_bytes(R"({"__metadata__":{"step":5}})", {}),
                  {"'__metadata__.step'", "must be a string"});
}

}  // namespace
}  // namespace kvaudit::model::test
