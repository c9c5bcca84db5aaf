#include "suite/manifest/diagnostics.h"

namespace kvaudit::manifest {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) {
    if (!s.empty()) s += '\n';
    s += l;
  }
  return s;
}

}  // namespace

ManifestError::ManifestError(std::vector<std::string> lines)
    : InputError(join_lines(lines)), lines_(std::move(lines)) {}

void Diagnostics::error(SourcePos pos, const std::string& field, const std::string& what) {
  std::string line = file_ + ":" + std::to_string(pos.line > 0 ? pos.line : 1) + ":" +
                     std::to_string(pos.column > 0 ? pos.column : 1) + ": ";
  if (!field.empty()) line += field + ": ";
  line += what;
  lines_.push_back(std::move(line));
}

void Diagnostics::throw_if_any() const {
  if (!lines_.empty()) throw ManifestError(lines_);
}

}  // namespace kvaudit::manifest
