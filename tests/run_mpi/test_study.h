// A small synthetic study for the scheduler's unit tests: the reduce tests' synthetic study
// generator (manifest, lock and shards written as a real run writes them), plus a fake unit
// executor whose records are a pure function of the cell.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/records/cell_record.h"
#include "suite/run/cell_identity.h"
#include "tests/reduce/synthetic_study.h"

namespace kvaudit::run::testing {

// <KVAUDIT_RUN_TEST_TMP>/<suite>.<test>[.suffix], emptied first.
inline std::filesystem::path fresh_test_dir(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  if (!suffix.empty()) name += "." + suffix;
  const auto dir = std::filesystem::path(KVAUDIT_RUN_TEST_TMP) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// 1 model × 2 tasks × 3 instances × sdpa = 6 units; (2 methods × 2 ratios + 1) × 2 protocols = 10
// cells per unit.
inline reduce::testing::SyntheticConfig small_config(int ranks) {
  reduce::testing::SyntheticConfig c;
  c.name = "scheduler-test";
  c.models = {"model-a"};
  c.base = {0.8};
  c.tasks = {"niah_single_1", "vt"};
  c.instances = 3;
  c.compression = {0.25, 0.5};
  c.backends = {"sdpa"};
  c.methods = {{"keydiff", "keydiff", "", 0.1, 0.0}, {"snapkv", "snapkv", "", 0.1, 0.2}};
  c.certified_methods = {};
  c.declare_families = false;
  c.calibration = 0;
  c.test = 0;
  c.ranks = ranks;
  c.flush_every = 4;
  return c;
}

struct LoadedTestStudy {
  reduce::testing::SyntheticStudy study;
  manifest::Manifest manifest;
  manifest::Expansion expansion;
};

inline LoadedTestStudy load_test_study(const std::filesystem::path& dir, int ranks) {
  LoadedTestStudy s;
  s.study = reduce::testing::write_synthetic_study(dir, small_config(ranks));
  s.manifest = manifest::load_manifest(s.study.manifest_file.string());
  s.expansion = manifest::expand(s.manifest);
  return s;
}

// A fake executor's record: the cell's identity, a score and an output derived from the cell id.
inline records::CellRecord fake_record(const manifest::Manifest& m, const manifest::Unit& u,
                                       const manifest::Cell& c) {
  records::CellRecord r = cell_identity_record(m, u, c);
  r.score = static_cast<double>(c.id % 2);
  r.output = "answer " + std::to_string(c.id % 97);
  r.n_generated_tokens = 3;
  return r;
}

}  // namespace kvaudit::run::testing
