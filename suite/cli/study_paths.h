// Where a study's outputs go, and whether the files it names exist. Output: --output-dir when given
// (relative to the working directory), else study.output_dir resolved against the manifest's
// directory.
#pragma once

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <string>

#include "base/errors.h"
#include "suite/manifest/manifest.h"
#include "suite/manifest/path_check.h"

namespace kvaudit::cli {

inline std::filesystem::path study_output_dir(const manifest::Manifest& m,
                                              const boost::program_options::variables_map& vm) {
  if (vm.count("output-dir")) {
    return std::filesystem::absolute(vm["output-dir"].as<std::string>()).lexically_normal();
  }
  return std::filesystem::absolute(m.resolve(m.study.output_dir)).lexically_normal();
}

// Prints every missing or wrong model/data path (file:line:column lines) to stderr and throws
// InputError if there is any; `consequence` ends the summary ("nothing was written").
inline void require_paths_exist(const manifest::Manifest& m, const std::string& consequence) {
  const auto missing = manifest::check_paths(m);
  if (missing.empty()) return;
  for (const auto& line : missing) std::cerr << line << "\n";
  throw InputError(std::to_string(missing.size()) +
                   (missing.size() == 1 ? " path is" : " paths are") + " missing or wrong; " +
                   consequence);
}

}  // namespace kvaudit::cli
