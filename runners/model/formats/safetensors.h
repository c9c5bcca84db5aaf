// safetensors reader (huggingface/safetensors format; see docs/design/numerics.md §safetensors and
// safetensors/src/tensor.rs):
//   bytes 0..8        N, little-endian u64 header length (N <= 100,000,000 and 8 + N <= file size)
//   bytes 8..8+N      UTF-8 JSON object starting with '{', optionally right-padded with spaces:
//                     {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//                      "__metadata__": {string: string}}
//   bytes 8+N..       the data buffer; offsets are half-open and relative to its start.
// Validation (every failure is a ModelInputError naming the file, the tensor/field and the
// problem): known dtype strings, shape x dtype size == end - begin (overflow-checked), offsets
// inside the buffer, tensors neither overlapping nor leaving holes (the buffer is covered exactly),
// no duplicate tensor names (detected with nlohmann's parser callback, which sees every key),
// __metadata__ values are strings.
//
// SafetensorsCheckpoint reads an HF model directory: a single `model.safetensors`, or the shards
// listed in `model.safetensors.index.json` (weight_map: tensor name -> shard file name; shard names
// must be plain names inside the directory, every shard must exist and hold its mapped tensors).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runners/model/formats/mapped_file.h"

namespace kvaudit::model {

// Every dtype string the safetensors format defines. Element sizes: BOOL..F8_E5M2FNUZ 1 byte,
// I16..BF16 2 bytes, I32..F32 4 bytes, F64..C64 8 bytes, F4 4 bits, F6_* 6 bits.
// clang-format off
enum class SafetensorsDtype {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
  I16, U16, F16, BF16,
  I32, U32, F32,
  F64, I64, U64, C64,
  F4, F6_E2M3, F6_E3M2
};
// clang-format on

// The dtype string as written in headers ("BF16", ...).
std::string_view safetensors_dtype_name(SafetensorsDtype dtype);
// Bits per element (4 for F4, 6 for F6_*, 8 x bytes otherwise).
int safetensors_dtype_bits(SafetensorsDtype dtype);

struct SafetensorsTensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<std::int64_t> shape;  // PyTorch order, row-major; empty for a 0-rank tensor
  std::uint64_t data_begin = 0;     // relative to the data buffer, half-open [begin, end)
  std::uint64_t data_end = 0;
  std::uint64_t element_count() const;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws ModelInputError (message starts with the path).
  static SafetensorsFile open(const std::filesystem::path& path);
  // Parses bytes owned by the caller (they must outlive the result); `source_name` is used in
  // messages in place of a path. This is the fuzzing entry point.
  static SafetensorsFile parse(std::span<const std::uint8_t> bytes, std::string source_name);

  const std::string& source() const { return source_; }
  // Tensor names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(std::string_view name) const;
  // Throws ModelInputError naming the file and the tensor when absent.
  const SafetensorsTensorInfo& info(std::string_view name) const;
  // The tensor's bytes (little-endian, row-major) inside the mapping.
  std::span<const std::uint8_t> raw(std::string_view name) const;
  // F32, F16 and BF16 widened exactly to f32; every other dtype is rejected naming the tensor and
  // the dtype.
  std::vector<float> to_f32(std::string_view name) const;
  // The __metadata__ object (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Offset of the data buffer in the file (8 + N).
  std::uint64_t data_offset() const { return data_offset_; }

 private:
  SafetensorsFile() = default;

  std::string source_;
  std::shared_ptr<const MappedFile> mapping_;  // null when parsed from caller-owned bytes
  std::span<const std::uint8_t> buffer_;       // the data buffer
  std::uint64_t data_offset_ = 0;
  std::map<std::string, SafetensorsTensorInfo, std::less<>> tensors_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

// An HF checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json (the index wins when both exist).
class SafetensorsCheckpoint {
 public:
  // Throws ModelInputError naming the directory/index/shard and the problem.
  static SafetensorsCheckpoint open(const std::filesystem::path& model_dir);

  const std::filesystem::path& directory() const { return directory_; }
  // Every tensor name, sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(std::string_view name) const;
  // The file holding `name`; throws ModelInputError naming the checkpoint and the tensor when
  // absent.
  const SafetensorsFile& file_of(std::string_view name) const;
  const SafetensorsTensorInfo& info(std::string_view name) const {
    return file_of(name).info(name);
  }
  std::vector<float> to_f32(std::string_view name) const { return file_of(name).to_f32(name); }
  // The shard files in use (one element for a single-file checkpoint).
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  std::filesystem::path directory_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t, std::less<>> file_index_;  // tensor -> files_ index
  std::vector<std::string> names_;
};

}  // namespace kvaudit::model
