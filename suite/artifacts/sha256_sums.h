// SHA256SUMS of a bundle: every file under a directory (except SHA256SUMS itself) with its SHA-256,
// in `sha256sum`'s format (`<64 lowercase hex>  <relative path>\n`, sorted by path), so an
// evaluator can also check a bundle with `sha256sum -c SHA256SUMS`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvaudit::artifacts {

struct SumsEntry {
  std::string sha256;  // 64 lowercase hex digits
  std::string path;    // relative, '/'-separated, no "." or ".." component
};

// Hashes every regular file below `root` (recursively, except `SHA256SUMS`) and writes
// root/SHA256SUMS (a new file). InputError when something below root is neither a regular file
// nor a directory (a link, a device).
void write_sums(const std::filesystem::path& root);

// Parses SHA256SUMS text (untrusted: a bundle from elsewhere). InputError naming `file`, the line
// and what is wrong: not `<64 hex>  <path>`, an absolute path or a "." / ".." component, a
// duplicate path, more than 1,000,000 lines.
std::vector<SumsEntry> parse_sums(const std::string& text, const std::string& file);

struct SumsCheck {
  std::vector<std::string> mismatched;   // "path: listed <hex>, file has <hex>"
  std::vector<std::string> missing;      // listed but absent (or not a regular file)
  std::vector<std::string> unlisted;     // present below root but not listed
  std::vector<std::string> not_regular;  // links, devices, ... below root (never followed)
  std::size_t checked = 0;               // files whose digest matched
  bool ok() const {
    return mismatched.empty() && missing.empty() && unlisted.empty() && not_regular.empty();
  }
};

// Checks root/SHA256SUMS against the files below root. InputError when SHA256SUMS is absent or
// malformed.
SumsCheck check_sums(const std::filesystem::path& root);

}  // namespace kvaudit::artifacts
