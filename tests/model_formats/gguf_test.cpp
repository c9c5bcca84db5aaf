// GgufFile: the golden file written by gguf-py's GGUFWriter (metadata of every value type incl.
// nested arrays, tensors of every supported ggml type compared bit-exactly with
// gguf.quants.dequantize, custom alignment, ne[] vs torch order), typed accessors, and malformed
// files built byte by byte, each rejected with a message naming the file and the key/tensor.
#include "runners/model/formats/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

// gguf-py's GGUFValueType names (lower-cased) -> ours.
std::string our_type_name(const std::string& python_name) {
  static const std::map<std::string, std::string> names{
      {"uint8", "u8"},      {"int8", "i8"},     {"uint16", "u16"},  {"int16", "i16"},
      {"uint32", "u32"},    {"int32", "i32"},   {"float32", "f32"}, {"bool", "bool"},
      {"string", "string"}, {"array", "array"}, {"uint64", "u64"},  {"int64", "i64"},
      {"float64", "f64"}};
  return names.at(python_name);
}

// Compares a parsed value with its JSON description (numbers compared exactly).
void expect_value(const GgufValue& value, const nlohmann::json& want, const std::string& where) {
  SCOPED_TRACE(where);
  switch (value.type) {
    case GgufValueType::u8:
      EXPECT_EQ(std::get<std::uint8_t>(value.data), want.get<std::uint64_t>());
      break;
    case GgufValueType::i8:
      EXPECT_EQ(std::get<std::int8_t>(value.data), want.get<std::int64_t>());
      break;
    case GgufValueType::u16:
      EXPECT_EQ(std::get<std::uint16_t>(value.data), want.get<std::uint64_t>());
      break;
    case GgufValueType::i16:
      EXPECT_EQ(std::get<std::int16_t>(value.data), want.get<std::int64_t>());
      break;
    case GgufValueType::u32:
      EXPECT_EQ(std::get<std::uint32_t>(value.data), want.get<std::uint64_t>());
      break;
    case GgufValueType::i32:
      EXPECT_EQ(std::get<std::int32_t>(value.data), want.get<std::int64_t>());
      break;
    case GgufValueType::u64:
      EXPECT_EQ(std::get<std::uint64_t>(value.data), want.get<std::uint64_t>());
      break;
    case GgufValueType::i64:
      EXPECT_EQ(std::get<std::int64_t>(value.data), want.get<std::int64_t>());
      break;
    case GgufValueType::f32:
      EXPECT_EQ(std::get<float>(value.data), static_cast<float>(want.get<double>()));
      break;
    case GgufValueType::f64:
      EXPECT_EQ(std::get<double>(value.data), want.get<double>());
      break;
    case GgufValueType::boolean:
      EXPECT_EQ(std::get<bool>(value.data), want.get<bool>());
      break;
    case GgufValueType::string:
      EXPECT_EQ(std::get<std::string>(value.data), want.get<std::string>());
      break;
    case GgufValueType::array: {
      const auto& array = std::get<GgufArray>(value.data);
      ASSERT_EQ(array.elements.size(), want.size());
      for (std::size_t i = 0; i < array.elements.size(); ++i) {
        EXPECT_EQ(array.elements[i].type, array.element_type);
        expect_value(array.elements[i], want[i], where + "[" + std::to_string(i) + "]");
      }
      break;
    }
  }
}

class GgufGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream in(golden_dir() / "gguf_types.json");
    expected_ = new nlohmann::json(nlohmann::json::parse(in));
    file_ = new GgufFile(GgufFile::open(golden_dir() / "gguf_types.gguf"));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete file_;
  }
  static nlohmann::json* expected_;
  static GgufFile* file_;
};
nlohmann::json* GgufGolden::expected_ = nullptr;
GgufFile* GgufGolden::file_ = nullptr;

TEST_F(GgufGolden, HeaderAndAlignment) {
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(file_->alignment(), 64u);
  EXPECT_EQ(file_->data_offset() % 64, 0u);
  for (const auto& t : file_->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
  EXPECT_EQ(file_->get_string("general.architecture"), "kvaudit_golden");
}

TEST_F(GgufGolden, MetadataOfEveryTypeIncludingNestedArrays) {
  for (const auto& [key, want] : (*expected_)["metadata"].items()) {
    SCOPED_TRACE(key);
    const GgufValue* value = file_->find(key);
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(gguf_value_type_name(value->type), our_type_name(want["type"].get<std::string>()));
    if (want.contains("element_type")) {
      EXPECT_EQ(gguf_value_type_name(std::get<GgufArray>(value->data).element_type),
                our_type_name(want["element_type"].get<std::string>()));
    }
    expect_value(*value, want["value"], key);
  }
  EXPECT_EQ(file_->get("test.nested_i32").type_description(), "array of array of i32");
}

TEST_F(GgufGolden, TypedAccessors) {
  EXPECT_EQ(file_->get_u32("test.u32"), 4000000000u);
  EXPECT_EQ(file_->get_i32("test.i32"), -2000000000);
  EXPECT_EQ(file_->get_u64("test.u64"), 18000000000000000000ull);
  EXPECT_EQ(file_->get_integer("test.u16"), 60000);
  EXPECT_EQ(file_->get_integer("test.i64"), -9000000000000000000ll);
  EXPECT_EQ(file_->get_float("test.f64"), 2.718281828459045);
  EXPECT_TRUE(file_->get_bool("test.bool_true"));
  EXPECT_EQ(file_->get_string_array("test.array_string"),
            (std::vector<std::string>{"a", "", "merges like Ġ t"}));
  EXPECT_EQ(file_->get_i32_array("test.array_i32"),
            (std::vector<std::int32_t>{-1, 0, 1, 2147483647}));
  EXPECT_EQ(file_->get_f32_array("test.array_f32"), (std::vector<float>{0.5f, -1.25f, 1e-3f}));
  EXPECT_EQ(file_->get_integer_array("test.array_u8"), (std::vector<std::int64_t>{1, 2, 255}));
  EXPECT_EQ(file_->array_size("test.nested_string"), 2u);
  EXPECT_FALSE(file_->find_integer("test.absent").has_value());
}

TEST_F(GgufGolden, AccessorErrorsNameKeyExpectedAndActualType) {
  const std::string path = (golden_dir() / "gguf_types.gguf").string();
  expect_model_error([&] { (void)file_->get_u32("test.string"); },
                     {path, "'test.string'", "expected u32", "found string"});
  expect_model_error([&] { (void)file_->get_string_array("test.array_i32"); },
                     {path, "'test.array_i32'", "expected array of string", "found array of i32"});
  expect_model_error([&] { (void)file_->get_integer("test.f32"); },
                     {"'test.f32'", "expected an integer", "found f32"});
  expect_model_error([&] { (void)file_->get_integer("test.u64"); }, {"'test.u64'", "too large"});
  expect_model_error([&] { (void)file_->get_string("test.absent"); },
                     {path, "'test.absent'", "missing"});
  expect_model_error([&] { (void)file_->find_integer("test.string"); },
                     {"'test.string'", "found string"});
}

TEST_F(GgufGolden, TensorsOfEverySupportedTypeMatchGgufPyDequantizeBitExactly) {
  int compared = 0;
  for (const auto& [name, want] : (*expected_)["tensors"].items()) {
    SCOPED_TRACE(name);
    const GgufTensorInfo& info = file_->tensor(name);
    EXPECT_EQ(ggml_type_name(info.type), want["type"].get<std::string>());
    EXPECT_EQ(info.ne, want["ne"].get<std::vector<std::uint64_t>>());
    if (!want["supported"].get<bool>() || !file_->has_tensor(name + ".expected")) continue;
    const auto values = file_->tensor_to_f32(name);
    const auto reference = file_->tensor_to_f32(name + ".expected");
    ASSERT_EQ(values.size(), reference.size());
    EXPECT_EQ(std::memcmp(values.data(), reference.data(), values.size() * sizeof(float)), 0);
    ++compared;
  }
  EXPECT_EQ(compared, 6);  // F32, F16, BF16, Q8_0, Q4_0, Q4_1
}

TEST_F(GgufGolden, TorchShapeReversesNe) {
  const auto& cube = file_->tensor("t_3d");
  EXPECT_EQ(cube.ne, (std::vector<std::uint64_t>{32, 3, 2}));
  EXPECT_EQ(cube.torch_shape(), (std::vector<std::int64_t>{2, 3, 32}));
  const auto values = file_->tensor_to_f32("t_3d");
  ASSERT_EQ(values.size(), 192u);
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_EQ(values[1 * 96 + 2 * 32 + 5], 1 * 96 + 2 * 32 + 5.0f);  // row-major over torch_shape
}

TEST_F(GgufGolden, UnsupportedGgmlTypeNamesTensorAndType) {
  const std::string path = (golden_dir() / "gguf_types.gguf").string();
  expect_model_error([&] { (void)file_->tensor_to_f32("t_q5_0"); },
                     {path, "tensor 't_q5_0'", "Q5_0", "not supported"});
  expect_model_error([&] { (void)file_->tensor("absent"); }, {path, "'absent'", "missing"});
}

TEST(GgufParse, MinimalHandBuiltFile) {
  Bytes b = gguf_header(2, 1, 1);
  b.str("general.name").u32(kString).str("mini");
  b.str("w").u32(2).u64(2).u64(1).u32(kGgmlF32).u64(0);
  b.pad_to(32).f32(1.5f).f32(-2.0f);
  const auto file = GgufFile::parse(b.data(), "mini.gguf");
  EXPECT_EQ(file.version(), 2u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.keys(), std::vector<std::string>{"general.name"});
  EXPECT_EQ(file.tensor("w").torch_shape(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(file.tensor_to_f32("w"), (std::vector<float>{1.5f, -2.0f}));
}

// ---- malformed files ----

class GgufMalformed : public ::testing::Test {
 protected:
  void expect_rejected(const Bytes& bytes, std::initializer_list<std::string> parts) {
    const auto path = write_file(scratch_dir() / "bad.gguf", bytes.data());
    std::vector<std::string> all{path.string()};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      (void)GgufFile::open(path);
      ADD_FAILURE() << "expected a ModelInputError";
    } catch (const ModelInputError& e) {
      for (const auto& part : all)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "missing '" << part << "' in: " << e.what();
    }
  }
  // One tensor info "w" (no metadata), then padding and `data_bytes` zero bytes of data.
  static Bytes one_tensor(std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t offset,
                          std::size_t data_bytes, std::uint32_t n_dims_override = 0) {
    Bytes b = gguf_header(3, 1, 0);
    b.str("w").u32(n_dims_override ? n_dims_override : static_cast<std::uint32_t>(ne.size()));
    for (const auto d : ne) b.u64(d);
    b.u32(type).u64(offset);
    b.pad_to(32).zeros(data_bytes);
    return b;
  }
};

TEST_F(GgufMalformed, BadMagic) {
  Bytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  expect_rejected(b, {"magic", "not a GGUF file", "47 47 4d 4c"});
}

TEST_F(GgufMalformed, Version1IsRejected) {
  expect_rejected(gguf_header(1, 0, 0), {"version", "version 1 is not supported"});
}

TEST_F(GgufMalformed, UnknownVersion) {
  expect_rejected(gguf_header(7, 0, 0), {"version", "unknown GGUF version 7"});
}

TEST_F(GgufMalformed, TruncatedHeader) {
  Bytes b;
  b.raw("GGUF").u32(3).u32(0);
  expect_rejected(b, {"tensor_count", "truncated"});
}

TEST_F(GgufMalformed, StringLengthPastEndOfFile) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("a.key").u32(kString).u64(1000).raw("abc");
  expect_rejected(b, {"metadata key 'a.key'", "string length 1000 goes past the end of the file"});
}

TEST_F(GgufMalformed, KeyLengthPastEndOfFile) {
  Bytes b = gguf_header(3, 0, 1);
  b.u64(1ull << 62).raw("key bytes that stop early");
  expect_rejected(b, {"metadata key #0", "string length", "past the end"});
}

TEST_F(GgufMalformed, HugeArrayCount) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("big").u32(kArray).u32(kU32).u64(1ull << 40).u32(1);
  expect_rejected(b, {"metadata key 'big'", "array count 1099511627776", "exceeds"});
}

TEST_F(GgufMalformed, ArraysNestedTooDeep) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("deep").u32(kArray);
  for (int i = 0; i < 9; ++i) b.u32(kArray).u64(1);
  b.u32(kU8).u64(0);
  expect_rejected(b, {"metadata key 'deep'", "nested deeper than 8"});
}

TEST_F(GgufMalformed, TruncatedValue) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("n").u32(kU32).u8(1).u8(2);
  expect_rejected(b, {"metadata key 'n'", "truncated"});
}

TEST_F(GgufMalformed, UnknownValueType) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("odd").u32(13).u64(0);
  expect_rejected(b, {"metadata key 'odd'", "unknown value type 13"});
}

TEST_F(GgufMalformed, BoolMustBeZeroOrOne) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("flag").u32(kBool).u8(2);
  expect_rejected(b, {"metadata key 'flag'", "bool value must be 0 or 1, found 2"});
}

TEST_F(GgufMalformed, DuplicateKey) {
  Bytes b = gguf_header(3, 0, 2);
  b.str("k").u32(kU8).u8(1).str("k").u32(kU8).u8(2);
  expect_rejected(b, {"metadata key 'k'", "duplicate key"});
}

TEST_F(GgufMalformed, KvCountBeyondFile) {
  expect_rejected(gguf_header(3, 0, 1ull << 50), {"kv_count", "exceeds"});
}

TEST_F(GgufMalformed, AlignmentNotPowerOfTwo) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("general.alignment").u32(kU32).u32(48);
  expect_rejected(b, {"'general.alignment'", "48 is not a power of two"});
}

TEST_F(GgufMalformed, AlignmentOfWrongType) {
  Bytes b = gguf_header(3, 0, 1);
  b.str("general.alignment").u32(kI32).i32(32);
  expect_rejected(b, {"'general.alignment'", "expected u32", "found i32"});
}

TEST_F(GgufMalformed, MisalignedTensorOffset) {
  expect_rejected(one_tensor({4}, kGgmlF32, 4, 64),
                  {"tensor 'w'", "offset 4 is not a multiple of the alignment 32"});
}

TEST_F(GgufMalformed, TensorDataPastEndOfFile) {
  expect_rejected(one_tensor({1000}, kGgmlF32, 0, 16), {"tensor 'w'", "past the end of the file"});
}

TEST_F(GgufMalformed, UnknownGgmlType) {
  expect_rejected(one_tensor({4}, 4, 0, 16), {"tensor 'w'", "unknown ggml type 4"});
}

TEST_F(GgufMalformed, TooManyDims) {
  expect_rejected(one_tensor({1, 1, 1, 1, 1}, kGgmlF32, 0, 4),
                  {"tensor 'w'", "n_dims 5 exceeds the maximum of 4"});
}

TEST_F(GgufMalformed, DimsProductOverflows) {
  expect_rejected(one_tensor({1ull << 32, 1ull << 32}, kGgmlF32, 0, 4),
                  {"tensor 'w'", "dimensions overflow"});
}

TEST_F(GgufMalformed, RowNotAWholeNumberOfBlocks) {
  expect_rejected(one_tensor({16}, kGgmlQ8_0, 0, 34),
                  {"tensor 'w'", "ne[0] = 16", "Q8_0 block size 32"});
}

TEST_F(GgufMalformed, TensorNameTooLong) {
  Bytes b = gguf_header(3, 1, 0);
  b.str(std::string(64, 'n')).u32(1).u64(1).u32(kGgmlF32).u64(0);
  expect_rejected(b, {"tensor #0 name", "exceeds the limit of 63"});
}

TEST_F(GgufMalformed, OverlappingTensors) {
  Bytes b = gguf_header(3, 2, 0);
  b.str("a").u32(1).u64(16).u32(kGgmlF32).u64(0);
  b.str("b").u32(1).u64(16).u32(kGgmlF32).u64(32);
  b.pad_to(32).zeros(96);
  expect_rejected(b, {"tensor 'b'", "overlaps tensor 'a'"});
}

}  // namespace
}  // namespace kvaudit::model::test
