// SHA-256 sidecars of published shards (see shard_checksum.h).
#include "suite/records/shard_checksum.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "base/errors.h"
#include "suite/common/atomic_file.h"
#include "suite/common/sha256.h"

namespace kvaudit::records {
namespace {

constexpr std::size_t kMaxSidecarBytes = 4096;

bool is_lower_hex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::filesystem::path checksum_path(const std::filesystem::path& shard) {
  return std::filesystem::path(shard.string() + ".sha256");
}

std::string write_shard_checksum(const std::filesystem::path& file_to_hash,
                                 const std::filesystem::path& published_shard) {
  const std::string hex = to_hex(sha256_file(file_to_hash));
  write_new_file(checksum_path(published_shard),
                 hex + "  " + published_shard.filename().string() + "\n");
  return hex;
}

ChecksumCheck verify_shard_checksum(const std::filesystem::path& shard) {
  ChecksumCheck check;
  const std::filesystem::path sidecar = checksum_path(shard);
  const std::string name = shard.string();
  std::error_code ec;
  if (!std::filesystem::exists(sidecar, ec)) {
    check.status = ChecksumStatus::missing;
    check.message = name + ": no checksum file " + sidecar.filename().string();
    return check;
  }
  const auto size = std::filesystem::file_size(sidecar, ec);
  std::string text;
  if (!ec && size <= kMaxSidecarBytes) {
    std::ifstream in(sidecar, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string want_tail = "  " + shard.filename().string() + "\n";
  if (ec || size > kMaxSidecarBytes || text.size() != 64 + want_tail.size() ||
      !is_lower_hex(std::string_view(text).substr(0, 64)) || text.substr(64) != want_tail) {
    check.status = ChecksumStatus::malformed;
    check.message = name + ": checksum file " + sidecar.filename().string() +
                    " is not one line \"<64 lowercase hex>  " + shard.filename().string() + "\"";
    return check;
  }
  check.expected = text.substr(0, 64);
  check.actual = to_hex(sha256_file(shard));
  if (check.actual != check.expected) {
    check.status = ChecksumStatus::mismatch;
    check.message = name + ": SHA-256 " + check.actual + " differs from " +
                    sidecar.filename().string() + " (" + check.expected +
                    "): the shard changed after it was published";
    return check;
  }
  check.status = ChecksumStatus::verified;
  return check;
}

std::string_view to_string(ChecksumStatus status) {
  switch (status) {
    case ChecksumStatus::verified:
      return "verified";
    case ChecksumStatus::missing:
      return "missing";
    case ChecksumStatus::malformed:
      return "malformed";
    case ChecksumStatus::mismatch:
      return "mismatch";
  }
  return "?";
}

}  // namespace kvaudit::records
