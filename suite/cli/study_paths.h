// Where a study's outputs go: --output-dir when given (relative to the working directory), else
// study.output_dir resolved against the manifest's directory.
#pragma once

#include <boost/program_options.hpp>
#include <filesystem>

#include "suite/manifest/manifest.h"

namespace kvaudit::cli {

inline std::filesystem::path study_output_dir(const manifest::Manifest& m,
                                              const boost::program_options::variables_map& vm) {
  if (vm.count("output-dir")) {
    return std::filesystem::absolute(vm["output-dir"].as<std::string>()).lexically_normal();
  }
  return std::filesystem::absolute(m.resolve(m.study.output_dir)).lexically_normal();
}

}  // namespace kvaudit::cli
