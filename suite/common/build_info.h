// What this binary is: version, git commit, build flags. Embedded at build time
// (cmake/build_info.cmake), so a binary cannot misreport them.
#pragma once

#include <string>

namespace kvaudit {

struct BuildInfo {
  std::string version;
  std::string git_commit;  // 40 hex digits, or "unknown" outside a git checkout
  std::string git_dirty;   // "true", "false" or "unknown"
  std::string build_type;
  std::string compiler;
  std::string cxx_flags;
  bool with_cuda;
  bool with_sanitizers;
};

const BuildInfo& build_info();

}  // namespace kvaudit
