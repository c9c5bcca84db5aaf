// The fingerprint of a file (see file_fingerprint.h): size and SHA-256 from one streaming pass.
#include "suite/common/file_fingerprint.h"

#include "suite/common/sha256.h"

namespace kvaudit {

std::string describe(const FileFingerprint& f) {
  return std::to_string(f.bytes) + " bytes, sha256 " + f.sha256;
}

FileFingerprint fingerprint_file(const std::filesystem::path& path) {
  FileFingerprint out;
  out.sha256 = to_hex(sha256_file(path, &out.bytes));
  return out;
}

}  // namespace kvaudit
