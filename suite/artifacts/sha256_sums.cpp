// SHA256SUMS of a bundle (see sha256_sums.h).
#include "suite/artifacts/sha256_sums.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "suite/artifacts/bundle_layout.h"
#include "suite/common/atomic_file.h"
#include "suite/common/sha256.h"

namespace kvaudit::artifacts {
namespace {

namespace fs = std::filesystem;

// Regular files below root (relative, generic form, sorted); everything else into `other`.
std::vector<std::string> files_below(const fs::path& root, std::vector<std::string>& other) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::file_status status = it->symlink_status();
    const std::string relative = fs::relative(it->path(), root).generic_string();
    if (fs::is_directory(status)) continue;
    if (!fs::is_regular_file(status)) {
      other.push_back(relative);
      continue;
    }
    if (relative == kSums) continue;
    out.push_back(relative);
  }
  std::sort(out.begin(), out.end());
  std::sort(other.begin(), other.end());
  return out;
}

bool safe_relative(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return path.back() != '/' && path.find('\0') == std::string::npos;
}

}  // namespace

void write_sums(const fs::path& root) {
  std::vector<std::string> other;
  const std::vector<std::string> files = files_below(root, other);
  if (!other.empty()) {
    throw InputError((root / other.front()).string() +
                     ": not a regular file; a bundle holds regular files and directories only");
  }
  std::string text;
  for (const std::string& f : files) text += to_hex(sha256_file(root / f)) + "  " + f + "\n";
  write_new_file(root / kSums, text);
}

std::vector<SumsEntry> parse_sums(const std::string& text, const std::string& file) {
  std::vector<SumsEntry> out;
  std::set<std::string> seen;
  std::size_t line_no = 0, start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      throw InputError(file + ": line " + std::to_string(line_no + 1) +
                       ": does not end with a newline (truncated?)");
    }
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line_no > 1'000'000) throw InputError(file + ": more than 1,000,000 lines");
    const auto bad = [&](const std::string& what) {
      return InputError(file + ": line " + std::to_string(line_no) + ": " + what);
    };
    if (line.size() < 67 || line.compare(64, 2, "  ") != 0) {
      throw bad("expected '<64 hex digits>  <path>'");
    }
    const std::string hex = line.substr(0, 64);
    if (!std::all_of(hex.begin(), hex.end(), [](unsigned char c) {
          return std::isdigit(c) != 0 || (c >= 'a' && c <= 'f');
        })) {
      throw bad("the digest is not 64 lowercase hex digits");
    }
    const std::string path = line.substr(66);
    if (!safe_relative(path)) {
      throw bad("'" + path + "' is not a relative path without '.' or '..' components");
    }
    if (!seen.insert(path).second) throw bad("'" + path + "' is listed twice");
    out.push_back({hex, path});
  }
  return out;
}

SumsCheck check_sums(const fs::path& root) {
  const fs::path sums_file = root / kSums;
  if (!fs::is_regular_file(fs::symlink_status(sums_file))) {
    throw InputError(sums_file.string() + ": missing; not a bundle made by `kvaudit bundle`?");
  }
  std::ifstream in(sums_file, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::vector<SumsEntry> entries = parse_sums(buffer.str(), sums_file.string());

  SumsCheck check;
  const std::vector<std::string> present = files_below(root, check.not_regular);
  std::set<std::string> listed;
  for (const SumsEntry& e : entries) {
    listed.insert(e.path);
    const fs::path file = root / e.path;
    if (!fs::is_regular_file(fs::symlink_status(file))) {
      check.missing.push_back(e.path);
      continue;
    }
    const std::string actual = to_hex(sha256_file(file));
    if (actual != e.sha256) {
      check.mismatched.push_back(e.path + ": listed " + e.sha256 + ", file has " + actual);
    } else {
      ++check.checked;
    }
  }
  for (const std::string& f : present) {
    if (!listed.contains(f)) check.unlisted.push_back(f);
  }
  return check;
}

}  // namespace kvaudit::artifacts
