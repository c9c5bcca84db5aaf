// The fingerprint of one file: its size and the SHA-256 of its bytes, read in 1 MiB blocks so a
// multi-GB model shard never has to fit in memory. Used by the preregistration lock to record the
// models and data a study was planned with (suite/manifest/input_fingerprints.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kvaudit {

struct FileFingerprint {
  std::uint64_t bytes = 0;
  std::string sha256;  // 64 lowercase hex digits

  bool operator==(const FileFingerprint&) const = default;
};

// "<bytes> bytes, sha256 <hex>": how messages print a fingerprint.
std::string describe(const FileFingerprint& f);

// Streams `path` through SHA-256. InputError naming the path when it cannot be opened or read (a
// missing file, a directory, a permission problem); InternalError when OpenSSL fails.
FileFingerprint fingerprint_file(const std::filesystem::path& path);

}  // namespace kvaudit
