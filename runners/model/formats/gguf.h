// GGUF reader (ggml `docs/gguf.md`, `src/gguf.cpp`; docs/design/numerics.md §GGUF). Little-endian
// layout:
//   magic "GGUF" | version u32 (2 or 3; v1 with 32-bit counts is rejected) | tensor_count u64 |
//   kv_count u64 | kv_count x (key string, value type u32, value) |
//   tensor_count x (name string, n_dims u32 <= 4, ne u64[n_dims], ggml type u32, offset u64) |
//   zero padding to ALIGNMENT | data section.
// A string is u64 length + bytes; an array is element type u32 + count u64 + elements (arrays
// nest). ALIGNMENT is `general.alignment` (u32, a non-zero multiple of 8), default 32.
//
// Everything is bounds-checked before use: counts against the bytes that remain (before any
// allocation), string lengths (keys <= 65535, tensor names < 64, values <= 64 MiB), array nesting
// depth (<= 8), tensor dims (> 0 elements product without overflow), the ggml type, offsets
// aligned and every tensor's data inside the file. Failures are ModelInputError naming the file,
// the key or tensor, the byte offset and what is wrong.
//
// Dimension order: GGUF/ggml stores ne[0] = the innermost (contiguous) dimension, the reverse of
// PyTorch. An HF [out, in] weight has ne = {in, out}; torch_shape() gives {out, in}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runners/model/formats/ggml_types.h"
#include "runners/model/formats/mapped_file.h"

namespace kvaudit::model {

enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12
};

// "u8", "string", "array", ... (GGUF spec names: uint8, string, array, ...).
std::string_view gguf_value_type_name(GgufValueType type);

struct GgufValue;

struct GgufArray {
  GgufValueType element_type = GgufValueType::u8;
  std::vector<GgufValue> elements;
};

// One metadata value. `data` holds the alternative matching `type`.
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t, std::int32_t,
               float, bool, std::string, GgufArray, std::uint64_t, std::int64_t, double>
      data;

  // Type description for messages: "u32", "string", "array of string", "array of array of i32".
  std::string type_description() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> ne;  // ggml order: ne[0] is innermost/contiguous
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t element_count = 0;
  std::uint64_t byte_size = 0;

  // PyTorch order (ne reversed), e.g. {out, in} for a linear weight.
  std::vector<std::int64_t> torch_shape() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws ModelInputError (message starts with the path).
  static GgufFile open(const std::filesystem::path& path);
  // Parses caller-owned bytes (they must outlive the result); `source_name` replaces the path in
  // messages. This is the fuzzing entry point.
  static GgufFile parse(std::span<const std::uint8_t> bytes, std::string source_name);

  const std::string& source() const { return source_; }
  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  // Offset of the data section in the file.
  std::uint64_t data_offset() const { return data_offset_; }

  // ---- metadata ----
  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  bool has(std::string_view key) const;
  // nullptr when absent.
  const GgufValue* find(std::string_view key) const;
  // Throws ModelInputError "<file>: metadata key '<key>' is missing".
  const GgufValue& get(std::string_view key) const;

  // Strict typed accessors: the stored type must match exactly, else ModelInputError
  // "<file>: metadata key '<key>': expected <type>, found <actual type>". Missing keys throw too.
  std::string get_string(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::uint32_t get_u32(std::string_view key) const;
  std::int32_t get_i32(std::string_view key) const;
  std::uint64_t get_u64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  // Lenient numeric accessors: any integer type (as i64; u64 above INT64_MAX is an error), any
  // float type (f32/f64) as double.
  std::int64_t get_integer(std::string_view key) const;
  double get_float(std::string_view key) const;
  // Optional variants: nullopt when the key is absent; a present key of the wrong type throws.
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<std::int64_t> find_integer(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  // Typed arrays (e.g. tokenizer.ggml.tokens / merges: string; token_type: i32; scores: f32).
  // The element type must match exactly.
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<std::int32_t> get_i32_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  // Any integer element type, as i64.
  std::vector<std::int64_t> get_integer_array(std::string_view key) const;
  // Element count of an array value (any element type); throws when not an array.
  std::uint64_t array_size(std::string_view key) const;

  // ---- tensors ----
  // Tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool has_tensor(std::string_view name) const;
  // nullptr when absent.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Throws ModelInputError "<file>: tensor '<name>' is missing".
  const GgufTensorInfo& tensor(std::string_view name) const;
  // The tensor's bytes inside the file.
  std::span<const std::uint8_t> tensor_data(const GgufTensorInfo& info) const;
  // Dequantized/widened to f32 (dequantize.h; F32, F16, BF16, Q8_0, Q4_0, Q4_1), in ggml order
  // (row-major over torch_shape()). Other types throw naming the file, tensor and type.
  std::vector<float> tensor_to_f32(std::string_view name) const;

 private:
  GgufFile() = default;

  std::string source_;
  std::shared_ptr<const MappedFile> mapping_;  // null when parsed from caller-owned bytes
  std::span<const std::uint8_t> bytes_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace kvaudit::model
