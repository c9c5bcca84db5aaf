// GgufFile: a bounds-checked GGUF v2/v3 parser over a byte span (see gguf.h for the layout and the
// limits; ggml `src/gguf.cpp` gguf_init_from_file_impl is the reference reader).
#include "runners/model/formats/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "runners/model/formats/dequantize.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr std::uint32_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr std::uint32_t kMaxAlignment = 1u << 30;
constexpr std::uint64_t kMaxKeyLength = 65535;      // gguf docs: keys are at most 65535 bytes
constexpr std::uint64_t kMaxTensorNameLength = 63;  // GGML_MAX_NAME = 64 including the NUL
constexpr std::uint64_t kMaxStringLength = 64ull << 20;
constexpr int kMaxArrayDepth = 8;
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

bool is_value_type(std::uint32_t code) { return code <= 12; }

// Smallest encoding of one value of `type` (used to bound array counts before allocating).
std::uint64_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::u16:
    case GgufValueType::i16:
      return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32:
      return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
    case GgufValueType::string:
      return 8;
    case GgufValueType::array:
      return 12;
  }
  return 1;
}

// A cursor over the untrusted bytes; every read is bounds-checked.
class Cursor {
 public:
  Cursor(std::span<const std::uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  std::uint64_t position() const { return pos_; }
  std::uint64_t remaining() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw ModelInputError(source_ + ": " + what + " (at byte offset " + std::to_string(pos_) + ")");
  }

  template <typename T>
  T read(const std::string& field) {
    if (remaining() < sizeof(T))
      fail(field + ": truncated file (needs " + std::to_string(sizeof(T)) + " bytes, " +
           std::to_string(remaining()) + " left)");
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const std::string& field, std::uint64_t max_length) {
    const auto length = read<std::uint64_t>(field + " (string length)");
    if (length > remaining())
      fail(field + ": string length " + std::to_string(length) +
           " goes past the end of the file (" + std::to_string(remaining()) + " bytes left)");
    if (length > max_length)
      fail(field + ": string length " + std::to_string(length) + " exceeds the limit of " +
           std::to_string(max_length) + " bytes");
    std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_),
                     static_cast<std::size_t>(length));
    pos_ += length;
    return text;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  const std::string& source_;
  std::uint64_t pos_ = 0;
};

GgufValue read_value(Cursor& cursor, GgufValueType type, const std::string& field, int depth) {
  GgufValue value;
  value.type = type;
  switch (type) {
    case GgufValueType::u8:
      value.data = cursor.read<std::uint8_t>(field);
      break;
    case GgufValueType::i8:
      value.data = cursor.read<std::int8_t>(field);
      break;
    case GgufValueType::u16:
      value.data = cursor.read<std::uint16_t>(field);
      break;
    case GgufValueType::i16:
      value.data = cursor.read<std::int16_t>(field);
      break;
    case GgufValueType::u32:
      value.data = cursor.read<std::uint32_t>(field);
      break;
    case GgufValueType::i32:
      value.data = cursor.read<std::int32_t>(field);
      break;
    case GgufValueType::f32:
      value.data = cursor.read<float>(field);
      break;
    case GgufValueType::boolean: {
      const auto byte = cursor.read<std::uint8_t>(field);
      if (byte > 1)
        cursor.fail(field + ": bool value must be 0 or 1, found " + std::to_string(byte));
      value.data = byte == 1;
      break;
    }
    case GgufValueType::string:
      value.data = cursor.read_string(field, kMaxStringLength);
      break;
    case GgufValueType::u64:
      value.data = cursor.read<std::uint64_t>(field);
      break;
    case GgufValueType::i64:
      value.data = cursor.read<std::int64_t>(field);
      break;
    case GgufValueType::f64:
      value.data = cursor.read<double>(field);
      break;
    case GgufValueType::array: {
      if (depth >= kMaxArrayDepth)
        cursor.fail(field + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) +
                    " levels");
      const auto element_code = cursor.read<std::uint32_t>(field + " (array element type)");
      if (!is_value_type(element_code))
        cursor.fail(field + ": unknown array element type " + std::to_string(element_code));
      const auto element_type = static_cast<GgufValueType>(element_code);
      const auto count = cursor.read<std::uint64_t>(field + " (array count)");
      if (count > cursor.remaining() / min_encoded_size(element_type))
        cursor.fail(field + ": array count " + std::to_string(count) + " of " +
                    std::string(gguf_value_type_name(element_type)) + " exceeds the " +
                    std::to_string(cursor.remaining()) + " bytes left in the file");
      GgufArray array;
      array.element_type = element_type;
      array.elements.reserve(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i)
        array.elements.push_back(
            read_value(cursor, element_type, field + "[" + std::to_string(i) + "]", depth + 1));
      value.data = std::move(array);
      break;
    }
  }
  return value;
}

std::string quoted_key(std::string_view key) { return "metadata key '" + std::string(key) + "'"; }

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  static constexpr std::array<std::string_view, 13> kNames{"u8",  "i8",  "u16",  "i16",    "u32",
                                                           "i32", "f32", "bool", "string", "array",
                                                           "u64", "i64", "f64"};
  const auto code = static_cast<std::uint32_t>(type);
  return code < kNames.size() ? kNames[code] : std::string_view("unknown");
}

std::string GgufValue::type_description() const {
  if (type != GgufValueType::array) return std::string(gguf_value_type_name(type));
  const auto& array = std::get<GgufArray>(data);
  if (array.element_type == GgufValueType::array && !array.elements.empty())
    return "array of " + array.elements.front().type_description();
  return "array of " + std::string(gguf_value_type_name(array.element_type));
}

std::vector<std::int64_t> GgufTensorInfo::torch_shape() const {
  return std::vector<std::int64_t>(ne.rbegin(), ne.rend());
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto mapping = std::make_shared<const MappedFile>(path);
  GgufFile file = parse(mapping->bytes(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

GgufFile GgufFile::parse(std::span<const std::uint8_t> bytes, std::string source_name) {
  GgufFile file;
  file.source_ = std::move(source_name);
  file.bytes_ = bytes;
  Cursor cursor(bytes, file.source_);

  // ---- header ----
  if (bytes.size() < 4)
    cursor.fail("magic: truncated file (" + std::to_string(bytes.size()) +
                " bytes; a GGUF file starts with 'GGUF')");
  const auto magic = cursor.read<std::array<std::uint8_t, 4>>("magic");
  if (magic != std::array<std::uint8_t, 4>{'G', 'G', 'U', 'F'}) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", magic[0], magic[1], magic[2], magic[3]);
    throw ModelInputError(file.source_ + ": magic: not a GGUF file (expected bytes 47 47 55 46 " +
                          "'GGUF', found " + hex + ")");
  }
  file.version_ = cursor.read<std::uint32_t>("version");
  if (file.version_ == 1)
    cursor.fail("version: GGUF version 1 is not supported (it uses 32-bit counts; re-convert the " +
                std::string("model with a current llama.cpp to get version 3)"));
  if (file.version_ != 2 && file.version_ != 3) {
    if ((file.version_ & 0xffffu) == 0 && __builtin_bswap32(file.version_) <= 3)
      cursor.fail("version: big-endian GGUF files are not supported");
    cursor.fail("version: unknown GGUF version " + std::to_string(file.version_) +
                " (supported: 2, 3)");
  }
  const auto tensor_count = cursor.read<std::uint64_t>("tensor_count");
  const auto kv_count = cursor.read<std::uint64_t>("kv_count");
  // Each KV needs >= 8 (key length) + 4 (type) + 1 bytes; each tensor info >= 8 + 4 + 4 + 8.
  if (kv_count > cursor.remaining() / 13)
    cursor.fail("kv_count " + std::to_string(kv_count) + " exceeds what the " +
                std::to_string(cursor.remaining()) + " bytes left in the file can hold");
  if (tensor_count > cursor.remaining() / 24)
    cursor.fail("tensor_count " + std::to_string(tensor_count) + " exceeds what the " +
                std::to_string(cursor.remaining()) + " bytes left in the file can hold");

  // ---- metadata ----
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = cursor.read_string("metadata key #" + std::to_string(i), kMaxKeyLength);
    const std::string field = quoted_key(key);
    if (file.metadata_.count(key) != 0) cursor.fail(field + ": duplicate key");
    const auto type_code = cursor.read<std::uint32_t>(field + " (value type)");
    if (!is_value_type(type_code))
      cursor.fail(field + ": unknown value type " + std::to_string(type_code));
    GgufValue value = read_value(cursor, static_cast<GgufValueType>(type_code), field, 0);
    file.keys_.push_back(key);
    file.metadata_.emplace(key, std::move(value));
  }
  if (const GgufValue* alignment = file.find("general.alignment")) {
    if (alignment->type != GgufValueType::u32)
      throw ModelInputError(file.source_ + ": metadata key 'general.alignment': expected u32, " +
                            "found " + alignment->type_description());
    const auto value = std::get<std::uint32_t>(alignment->data);
    if (value == 0 || (value & (value - 1)) != 0 || value > kMaxAlignment)
      throw ModelInputError(file.source_ + ": metadata key 'general.alignment': " +
                            std::to_string(value) + " is not a power of two in [1, 2^30]");
    file.alignment_ = value;
  } else {
    file.alignment_ = kDefaultAlignment;
  }

  // ---- tensor infos ----
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = cursor.read_string("tensor #" + std::to_string(i) + " name", kMaxTensorNameLength);
    const std::string field = "tensor '" + info.name + "'";
    if (file.tensor_index_.count(info.name) != 0) cursor.fail(field + ": duplicate tensor name");
    const auto n_dims = cursor.read<std::uint32_t>(field + " n_dims");
    if (n_dims > kMaxDims)
      cursor.fail(field + ": n_dims " + std::to_string(n_dims) + " exceeds the maximum of " +
                  std::to_string(kMaxDims));
    info.element_count = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = cursor.read<std::uint64_t>(field + " ne[" + std::to_string(d) + "]");
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          __builtin_mul_overflow(info.element_count, dim, &info.element_count) ||
          info.element_count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        cursor.fail(field + ": dimensions overflow 63 bits at ne[" + std::to_string(d) +
                    "] = " + std::to_string(dim));
      info.ne.push_back(dim);
    }
    const auto type_code = cursor.read<std::uint32_t>(field + " type");
    const auto traits = ggml_type_traits(type_code);
    if (!traits) cursor.fail(field + ": unknown ggml type " + std::to_string(type_code));
    info.type = static_cast<GgmlType>(type_code);
    const std::uint64_t ne0 = info.ne.empty() ? 1 : info.ne[0];
    if (ne0 % traits->block_elements != 0)
      cursor.fail(field + ": ne[0] = " + std::to_string(ne0) + " is not a multiple of the " +
                  std::string(traits->name) + " block size " +
                  std::to_string(traits->block_elements));
    // bytes = element_count / block_elements * block_bytes (element_count is a multiple of ne0).
    if (__builtin_mul_overflow(info.element_count / traits->block_elements,
                               static_cast<std::uint64_t>(traits->block_bytes), &info.byte_size))
      cursor.fail(field + ": byte size overflows 64 bits");
    info.offset = cursor.read<std::uint64_t>(field + " offset");
    if (info.offset % file.alignment_ != 0)
      cursor.fail(field + ": offset " + std::to_string(info.offset) +
                  " is not a multiple of the alignment " + std::to_string(file.alignment_));
    file.tensor_index_.emplace(info.name, file.tensors_.size());
    file.tensors_.push_back(std::move(info));
  }

  // ---- data section ----
  const std::uint64_t end_of_infos = cursor.position();
  const std::uint64_t padded =
      (end_of_infos + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  file.data_offset_ = padded;
  const std::uint64_t file_size = bytes.size();
  for (const auto& info : file.tensors_) {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    if (__builtin_add_overflow(file.data_offset_, info.offset, &begin) ||
        __builtin_add_overflow(begin, info.byte_size, &end) || end > file_size)
      throw ModelInputError(file.source_ + ": tensor '" + info.name + "': data [offset " +
                            std::to_string(info.offset) + ", " + std::to_string(info.byte_size) +
                            " bytes] in the data section at byte " +
                            std::to_string(file.data_offset_) + " goes past the end of the file (" +
                            std::to_string(file_size) + " bytes)");
  }
  // Tensors must not overlap (ggml lays them out back to back, padded to the alignment). The
  // sums cannot overflow: every tensor ends inside the file (checked above).
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& info : file.tensors_)
    if (info.byte_size > 0) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  const GgufTensorInfo* furthest = nullptr;  // the tensor reaching furthest so far
  for (const auto* info : by_offset) {
    if (furthest != nullptr && furthest->offset + furthest->byte_size > info->offset)
      throw ModelInputError(file.source_ + ": tensor '" + info->name + "': data at offset " +
                            std::to_string(info->offset) + " overlaps tensor '" + furthest->name +
                            "' [offset " + std::to_string(furthest->offset) + ", " +
                            std::to_string(furthest->byte_size) + " bytes]");
    if (furthest == nullptr ||
        info->offset + info->byte_size > furthest->offset + furthest->byte_size)
      furthest = info;
  }
  return file;
}

// ---- metadata accessors ----

bool GgufFile::has(std::string_view key) const { return metadata_.find(key) != metadata_.end(); }

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) throw ModelInputError(source_ + ": " + quoted_key(key) + " is missing");
  return *value;
}

namespace {

[[noreturn]] void wrong_type(const std::string& source, std::string_view key,
                             std::string_view expected, const GgufValue& value) {
  throw ModelInputError(source + ": " + quoted_key(key) + ": expected " + std::string(expected) +
                        ", found " + value.type_description());
}

template <typename T>
T get_exact(const GgufFile& file, std::string_view key, GgufValueType type) {
  const GgufValue& value = file.get(key);
  if (value.type != type) wrong_type(file.source(), key, gguf_value_type_name(type), value);
  return std::get<T>(value.data);
}

// Any integer alternative as i64; nullopt for non-integers.
std::optional<std::int64_t> as_integer(const GgufValue& value, const std::string& source,
                                       std::string_view key) {
  switch (value.type) {
    case GgufValueType::u8:
      return std::get<std::uint8_t>(value.data);
    case GgufValueType::i8:
      return std::get<std::int8_t>(value.data);
    case GgufValueType::u16:
      return std::get<std::uint16_t>(value.data);
    case GgufValueType::i16:
      return std::get<std::int16_t>(value.data);
    case GgufValueType::u32:
      return std::get<std::uint32_t>(value.data);
    case GgufValueType::i32:
      return std::get<std::int32_t>(value.data);
    case GgufValueType::i64:
      return std::get<std::int64_t>(value.data);
    case GgufValueType::u64: {
      const auto v = std::get<std::uint64_t>(value.data);
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw ModelInputError(source + ": " + quoted_key(key) + ": value " + std::to_string(v) +
                              " is too large");
      return static_cast<std::int64_t>(v);
    }
    default:
      return std::nullopt;
  }
}

const GgufArray& get_array(const GgufFile& file, std::string_view key, GgufValueType element,
                           std::string_view expected) {
  const GgufValue& value = file.get(key);
  if (value.type != GgufValueType::array) wrong_type(file.source(), key, expected, value);
  const auto& array = std::get<GgufArray>(value.data);
  if (element != GgufValueType::array && array.element_type != element)
    wrong_type(file.source(), key, expected, value);
  return array;
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  return get_exact<std::string>(*this, key, GgufValueType::string);
}
bool GgufFile::get_bool(std::string_view key) const {
  return get_exact<bool>(*this, key, GgufValueType::boolean);
}
std::uint32_t GgufFile::get_u32(std::string_view key) const {
  return get_exact<std::uint32_t>(*this, key, GgufValueType::u32);
}
std::int32_t GgufFile::get_i32(std::string_view key) const {
  return get_exact<std::int32_t>(*this, key, GgufValueType::i32);
}
std::uint64_t GgufFile::get_u64(std::string_view key) const {
  return get_exact<std::uint64_t>(*this, key, GgufValueType::u64);
}
float GgufFile::get_f32(std::string_view key) const {
  return get_exact<float>(*this, key, GgufValueType::f32);
}

std::int64_t GgufFile::get_integer(std::string_view key) const {
  const GgufValue& value = get(key);
  const auto integer = as_integer(value, source_, key);
  if (!integer) wrong_type(source_, key, "an integer", value);
  return *integer;
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue& value = get(key);
  if (value.type == GgufValueType::f32) return std::get<float>(value.data);
  if (value.type == GgufValueType::f64) return std::get<double>(value.data);
  wrong_type(source_, key, "f32 or f64", value);
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<std::int64_t> GgufFile::find_integer(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_integer(key);
}
std::optional<double> GgufFile::find_float(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}
std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const auto& array = get_array(*this, key, GgufValueType::string, "array of string");
  std::vector<std::string> result;
  result.reserve(array.elements.size());
  for (const auto& element : array.elements) result.push_back(std::get<std::string>(element.data));
  return result;
}

std::vector<std::int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const auto& array = get_array(*this, key, GgufValueType::i32, "array of i32");
  std::vector<std::int32_t> result;
  result.reserve(array.elements.size());
  for (const auto& element : array.elements) result.push_back(std::get<std::int32_t>(element.data));
  return result;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const auto& array = get_array(*this, key, GgufValueType::f32, "array of f32");
  std::vector<float> result;
  result.reserve(array.elements.size());
  for (const auto& element : array.elements) result.push_back(std::get<float>(element.data));
  return result;
}

std::vector<std::int64_t> GgufFile::get_integer_array(std::string_view key) const {
  const auto& array = get_array(*this, key, GgufValueType::array, "array of integers");
  std::vector<std::int64_t> result;
  result.reserve(array.elements.size());
  for (const auto& element : array.elements) {
    const auto integer = as_integer(element, source_, key);
    if (!integer) wrong_type(source_, key, "array of integers", get(key));
    result.push_back(*integer);
  }
  return result;
}

std::uint64_t GgufFile::array_size(std::string_view key) const {
  return get_array(*this, key, GgufValueType::array, "array").elements.size();
}

// ---- tensors ----

bool GgufFile::has_tensor(std::string_view name) const {
  return tensor_index_.find(name) != tensor_index_.end();
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* info = find_tensor(name);
  if (info == nullptr)
    throw ModelInputError(source_ + ": tensor '" + std::string(name) + "' is missing");
  return *info;
}

std::span<const std::uint8_t> GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return bytes_.subspan(static_cast<std::size_t>(data_offset_ + info.offset),
                        static_cast<std::size_t>(info.byte_size));
}

std::vector<float> GgufFile::tensor_to_f32(std::string_view name) const {
  const GgufTensorInfo& info = tensor(name);
  return dequantize_to_f32(info.type, tensor_data(info), info.element_count,
                           source_ + ": tensor '" + info.name + "'");
}

}  // namespace kvaudit::model
