// Paths of the LongBench golden fixtures (tests/golden/longbench/, written by
// tools/golden/make_longbench_golden.py) for the tests in this directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kvaudit::benchmarks::testing {

inline std::filesystem::path source_dir() { return KVAUDIT_SOURCE_DIR; }
inline std::filesystem::path golden_dir() { return source_dir() / "tests/golden/longbench"; }
inline std::filesystem::path sample_data_dir() { return golden_dir() / "data"; }
inline std::filesystem::path malformed_dir() { return golden_dir() / "malformed"; }

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path.string());
  return nlohmann::json::parse(in);
}

}  // namespace kvaudit::benchmarks::testing
