// SafetensorsFile: header parsing and validation, and f32 conversion (see safetensors.h for the
// format and the checks; safetensors/src/tensor.rs `read_metadata` / `validate` is the reference).
#include "runners/model/formats/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "runners/model/bf16.h"
#include "runners/model/formats/strict_json.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

static_assert(std::endian::native == std::endian::little,
              "the model readers assume a little-endian host (safetensors and GGUF are LE)");

namespace {

constexpr std::uint64_t kMaxHeaderSize = 100'000'000;  // safetensors MAX_HEADER_SIZE

struct DtypeEntry {
  SafetensorsDtype dtype;
  std::string_view name;
  int bits;
};

constexpr std::array kDtypes{
    DtypeEntry{SafetensorsDtype::BOOL, "BOOL", 8},
    DtypeEntry{SafetensorsDtype::U8, "U8", 8},
    DtypeEntry{SafetensorsDtype::I8, "I8", 8},
    DtypeEntry{SafetensorsDtype::F8_E5M2, "F8_E5M2", 8},
    DtypeEntry{SafetensorsDtype::F8_E4M3, "F8_E4M3", 8},
    DtypeEntry{SafetensorsDtype::F8_E8M0, "F8_E8M0", 8},
    DtypeEntry{SafetensorsDtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    DtypeEntry{SafetensorsDtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    DtypeEntry{SafetensorsDtype::I16, "I16", 16},
    DtypeEntry{SafetensorsDtype::U16, "U16", 16},
    DtypeEntry{SafetensorsDtype::F16, "F16", 16},
    DtypeEntry{SafetensorsDtype::BF16, "BF16", 16},
    DtypeEntry{SafetensorsDtype::I32, "I32", 32},
    DtypeEntry{SafetensorsDtype::U32, "U32", 32},
    DtypeEntry{SafetensorsDtype::F32, "F32", 32},
    DtypeEntry{SafetensorsDtype::F64, "F64", 64},
    DtypeEntry{SafetensorsDtype::I64, "I64", 64},
    DtypeEntry{SafetensorsDtype::U64, "U64", 64},
    DtypeEntry{SafetensorsDtype::C64, "C64", 64},
    DtypeEntry{SafetensorsDtype::F4, "F4", 4},
    DtypeEntry{SafetensorsDtype::F6_E2M3, "F6_E2M3", 6},
    DtypeEntry{SafetensorsDtype::F6_E3M2, "F6_E3M2", 6},
};

const DtypeEntry* find_dtype(std::string_view name) {
  for (const auto& entry : kDtypes)
    if (entry.name == name) return &entry;
  return nullptr;
}

const DtypeEntry& dtype_entry(SafetensorsDtype dtype) {
  for (const auto& entry : kDtypes)
    if (entry.dtype == dtype) return entry;
  return kDtypes[0];  // unreachable: every enumerator is in the table
}

std::string known_dtype_list() {
  std::string list;
  for (const auto& entry : kDtypes) {
    if (!list.empty()) list += ", ";
    list += entry.name;
  }
  return list;
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// One tensor entry of the header: {"dtype": str, "shape": [u64...], "data_offsets": [u64, u64]}.
SafetensorsTensorInfo parse_tensor_entry(const std::string& source, const std::string& name,
                                         const nlohmann::json& entry) {
  const std::string where = source + ": tensor '" + name + "'";
  if (!entry.is_object())
    throw ModelInputError(where + ": expected an object {dtype, shape, data_offsets}, found " +
                          json_type_name(entry));
  SafetensorsTensorInfo info;
  info.name = name;

  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) throw ModelInputError(where + ": field 'dtype' is missing");
  if (!dtype_it->is_string())
    throw ModelInputError(where + ": field 'dtype' must be a string, found " +
                          json_type_name(*dtype_it));
  const auto dtype_name = dtype_it->get<std::string>();
  const DtypeEntry* dtype = find_dtype(dtype_name);
  if (dtype == nullptr)
    throw ModelInputError(where + ": field 'dtype': unknown dtype '" + dtype_name +
                          "' (known: " + known_dtype_list() + ")");
  info.dtype = dtype->dtype;

  const auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) throw ModelInputError(where + ": field 'shape' is missing");
  if (!shape_it->is_array())
    throw ModelInputError(where + ": field 'shape' must be an array, found " +
                          json_type_name(*shape_it));
  std::uint64_t elements = 1;
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_unsigned())
      throw ModelInputError(where + ": field 'shape' must hold non-negative integers, found " +
                            json_type_name(dim) + " " + dim.dump());
    const auto value = dim.get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(elements, value, &elements))
      throw ModelInputError(where + ": field 'shape' " + shape_it->dump() +
                            ": element count overflows 64 bits");
    info.shape.push_back(static_cast<std::int64_t>(value));
  }

  const auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) throw ModelInputError(where + ": field 'data_offsets' is missing");
  if (!offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
    throw ModelInputError(where + ": field 'data_offsets' must be [begin, end] (two non-negative " +
                          "integers), found " + offsets_it->dump());
  info.data_begin = (*offsets_it)[0].get<std::uint64_t>();
  info.data_end = (*offsets_it)[1].get<std::uint64_t>();
  if (info.data_end < info.data_begin)
    throw ModelInputError(where + ": field 'data_offsets' " +
                          range_text(info.data_begin, info.data_end) + ": end is before begin");

  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype->bits), &bits))
    throw ModelInputError(where + ": shape " + shape_text(info.shape) + " x dtype " + dtype_name +
                          ": byte size overflows 64 bits");
  if (bits % 8 != 0)
    throw ModelInputError(where + ": shape " + shape_text(info.shape) + " with dtype " +
                          dtype_name + " is not a whole number of bytes");
  const std::uint64_t expected_bytes = bits / 8;
  if (info.data_end - info.data_begin != expected_bytes)
    throw ModelInputError(where + ": shape " + shape_text(info.shape) + " x dtype " + dtype_name +
                          " needs " + std::to_string(expected_bytes) +
                          " bytes but field 'data_offsets' " +
                          range_text(info.data_begin, info.data_end) + " spans " +
                          std::to_string(info.data_end - info.data_begin));
  return info;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDtype dtype) { return dtype_entry(dtype).name; }

int safetensors_dtype_bits(SafetensorsDtype dtype) { return dtype_entry(dtype).bits; }

std::uint64_t SafetensorsTensorInfo::element_count() const {
  std::uint64_t count = 1;
  for (const auto dim : shape) count *= static_cast<std::uint64_t>(dim);  // validated at parse
  return count;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto mapping = std::make_shared<const MappedFile>(path);
  SafetensorsFile file = parse(mapping->bytes(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::uint8_t> bytes,
                                       std::string source_name) {
  SafetensorsFile file;
  file.source_ = std::move(source_name);
  const std::string& source = file.source_;
  if (bytes.size() < 8)
    throw ModelInputError(source + ": header length: truncated file (" +
                          std::to_string(bytes.size()) +
                          " bytes; the 8-byte little-endian header length is missing)");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderSize)
    throw ModelInputError(source + ": header length " + std::to_string(header_size) +
                          " exceeds the limit of " + std::to_string(kMaxHeaderSize) + " bytes");
  if (header_size > bytes.size() - 8)
    throw ModelInputError(source + ": header length " + std::to_string(header_size) +
                          " goes beyond the end of the file (" + std::to_string(bytes.size()) +
                          " bytes)");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), header_size);
  if (header.empty() || header.front() != '{')
    throw ModelInputError(source + ": header: JSON must start with '{'");
  const nlohmann::json root = parse_json_strict(header, source + ": header");
  if (!root.is_object())
    throw ModelInputError(source + ": header: expected a JSON object, found " +
                          json_type_name(root));

  file.data_offset_ = 8 + header_size;
  file.buffer_ = bytes.subspan(static_cast<std::size_t>(file.data_offset_));
  const std::uint64_t buffer_size = file.buffer_.size();

  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object())
        throw ModelInputError(source + ": header field '__metadata__' must be an object of " +
                              "strings, found " + json_type_name(value));
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string())
          throw ModelInputError(source + ": header field '__metadata__." + meta_key +
                                "' must be a string, found " + json_type_name(meta_value));
        file.metadata_.emplace(meta_key, meta_value.get<std::string>());
      }
      continue;
    }
    SafetensorsTensorInfo info = parse_tensor_entry(source, key, value);
    if (info.data_end > buffer_size)
      throw ModelInputError(source + ": tensor '" + key + "': field 'data_offsets' " +
                            range_text(info.data_begin, info.data_end) +
                            " lies outside the data buffer of " + std::to_string(buffer_size) +
                            " bytes");
    file.tensors_.emplace(key, std::move(info));
  }

  // Coverage: sorted by offset, the tensors must tile [0, buffer_size) exactly.
  std::vector<const SafetensorsTensorInfo*> by_offset;
  by_offset.reserve(file.tensors_.size());
  for (const auto& [name, info] : file.tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return std::pair(a->data_begin, a->data_end) < std::pair(b->data_begin, b->data_end);
  });
  std::uint64_t covered = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const auto* info : by_offset) {
    if (info->data_begin < covered)
      throw ModelInputError(source + ": tensor '" + info->name + "': field 'data_offsets' " +
                            range_text(info->data_begin, info->data_end) + " overlaps tensor '" +
                            previous->name + "' " +
                            range_text(previous->data_begin, previous->data_end));
    if (info->data_begin > covered)
      throw ModelInputError(source + ": tensor '" + info->name + "': field 'data_offsets' " +
                            range_text(info->data_begin, info->data_end) +
                            " leaves a hole: bytes " + range_text(covered, info->data_begin) +
                            " of the data buffer belong to no tensor");
    covered = info->data_end;
    previous = info;
  }
  if (covered != buffer_size)
    throw ModelInputError(source + ": data buffer: bytes " + range_text(covered, buffer_size) +
                          " after the last tensor belong to no tensor (the header must cover " +
                          "the whole buffer)");

  for (const auto& [name, info] : file.tensors_) file.names_.push_back(name);
  return file;
}

bool SafetensorsFile::contains(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

const SafetensorsTensorInfo& SafetensorsFile::info(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw ModelInputError(source_ + ": tensor '" + std::string(name) + "' is missing");
  return it->second;
}

std::span<const std::uint8_t> SafetensorsFile::raw(std::string_view name) const {
  const auto& tensor = info(name);
  return buffer_.subspan(static_cast<std::size_t>(tensor.data_begin),
                         static_cast<std::size_t>(tensor.data_end - tensor.data_begin));
}

std::vector<float> SafetensorsFile::to_f32(std::string_view name) const {
  const auto& tensor = info(name);
  const auto bytes = raw(name);
  const std::size_t count = static_cast<std::size_t>(tensor.element_count());
  std::vector<float> values(count);
  switch (tensor.dtype) {
    case SafetensorsDtype::F32:
      if (count != 0) std::memcpy(values.data(), bytes.data(), count * sizeof(float));
      break;
    case SafetensorsDtype::F16:
    case SafetensorsDtype::BF16: {
      const bool is_bf16 = tensor.dtype == SafetensorsDtype::BF16;
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t bits = 0;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        values[i] = is_bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
      }
      break;
    }
    default:
      throw ModelInputError(source_ + ": tensor '" + tensor.name + "': dtype " +
                            std::string(safetensors_dtype_name(tensor.dtype)) +
                            " is not supported for model weights (expected F32, F16 or BF16)");
  }
  return values;
}

}  // namespace kvaudit::model
