// Collects manifest errors as `file:line:column: field: what is wrong` lines, so one run reports
// every problem at once; ManifestError carries them all.
#pragma once

#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

class ManifestError : public InputError {
 public:
  explicit ManifestError(std::vector<std::string> lines);
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void error(SourcePos pos, const std::string& field, const std::string& what);
  bool empty() const { return lines_.empty(); }
  const std::vector<std::string>& lines() const { return lines_; }
  // Throws ManifestError if any error was recorded.
  void throw_if_any() const;

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

}  // namespace kvaudit::manifest
