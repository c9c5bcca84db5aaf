// MappedFile: a read-only memory mapping of a whole file (RAII, move-only). The model readers parse
// untrusted bytes straight out of the mapping, so nothing is copied until a tensor is converted.
// Opening fails with ModelInputError naming the path and the reason: missing, a directory, empty,
// not a regular file, unreadable (errno text) or not mappable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace kvaudit::model {

class MappedFile {
 public:
  // Maps `path` read-only (PROT_READ, MAP_PRIVATE). Throws ModelInputError on failure.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // The mapped bytes; valid while this object lives.
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;

  std::filesystem::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kvaudit::model
