// The SHA-256 sidecar of a published shard: "<shard>.sha256" beside "<shard>" (e.g.
// part-….s0.h5.sha256), one line in sha256sum's format, "<64 hex>  <shard file name>\n", so that
// `sha256sum -c part-….h5.sha256` run in the shard directory verifies it too.
//
// The writer creates the sidecar after the shard's last byte is on disk and before the shard is
// published (link()); readers verify it before HDF5 parses the file, so a damaged published shard
// is refused, naming the file, instead of crashing or misleading the HDF5 library.
#pragma once

#include <filesystem>
#include <string>

namespace kvaudit::records {

// "<shard>.sha256".
std::filesystem::path checksum_path(const std::filesystem::path& shard);

// Hashes `file_to_hash` (the closed .tmp) and creates the sidecar of `published_shard` for it,
// without replacing an existing file (InputError naming it). Returns the hex digest.
std::string write_shard_checksum(const std::filesystem::path& file_to_hash,
                                 const std::filesystem::path& published_shard);

enum class ChecksumStatus {
  verified,   // the sidecar exists, is well formed, names the shard and matches its bytes
  missing,    // no sidecar (shards of schema versions 1 and 2 never had one)
  malformed,  // the sidecar exists but is not one sha256sum line for this shard
  mismatch,   // the shard's bytes do not hash to the sidecar's digest
};

struct ChecksumCheck {
  ChecksumStatus status = ChecksumStatus::missing;
  std::string expected;  // the sidecar's digest ("" when missing or malformed)
  std::string actual;    // the shard's digest now ("" when missing or malformed)
  std::string message;   // "<shard>: …" describing anything but `verified`
};

// Never throws for a missing or damaged sidecar (reported in the result); throws InputError when
// the shard itself cannot be read.
ChecksumCheck verify_shard_checksum(const std::filesystem::path& shard);

std::string_view to_string(ChecksumStatus status);

}  // namespace kvaudit::records
