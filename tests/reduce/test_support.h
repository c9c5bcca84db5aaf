// Shared helpers of the reduce tests: a fresh directory per test and a synthetic study reduced in
// it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "suite/reduce/reduce_study.h"
#include "tests/reduce/synthetic_study.h"

namespace kvaudit::reduce::testing {

// <KVAUDIT_REDUCE_TEST_TMP>/<suite>.<test>[.suffix], emptied first.
inline std::filesystem::path fresh_test_dir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name)
    if (c == '/') c = '_';
  if (!suffix.empty()) name += "." + suffix;
  const auto dir = std::filesystem::path(KVAUDIT_REDUCE_TEST_TMP) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline ReduceOptions options_for(const SyntheticStudy& s, bool figures = false, int threads = 2) {
  ReduceOptions o;
  o.load.results_dir = s.results_dir;
  o.figures = figures;
  o.threads = threads;
  return o;
}

}  // namespace kvaudit::reduce::testing
