// The preregistration lock: written once, never replaced by another study, checked by run.
#include "suite/manifest/prereg.h"

#include <gtest/gtest.h>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/plan_summary.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

nlohmann::json prereg_for(const std::string& text) {
  const Manifest m = parse_manifest(text, "quickstart.toml");
  const Expansion ex = expand(m);
  return make_prereg(m, ex, summarize(m, ex));
}

std::string quickstart() { return test::read_file(test::source_path("manifests/quickstart.toml")); }

TEST(Prereg, HoldsHashContractsCountsAndTool) {
  const auto j = prereg_for(quickstart());
  EXPECT_EQ(j["study"], "quickstart");
  EXPECT_EQ(j["manifest_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["counts"]["cells"], 352);
  EXPECT_EQ(j["counts"]["units"], 56);
  ASSERT_EQ(j["contracts"].size(), 2u);
  EXPECT_EQ(j["contracts"][0]["candidates"], nlohmann::json({0.5, 0.75}));
  EXPECT_EQ(j["contracts"][1]["candidates"], nlohmann::json({0.5}));
  EXPECT_EQ(j["splits"]["ruler-512"]["niah_multikey_1"]["calibration"].size(), 4u);
  EXPECT_EQ(j["splits"]["ruler-512"]["niah_multikey_1"]["test"].size(), 2u);
  EXPECT_TRUE(j["tool"].contains("git_commit"));
  EXPECT_EQ(j["created_utc"].get<std::string>().back(), 'Z');
  // The canonical manifest inside hashes to the recorded hash.
  EXPECT_EQ(sha256_hex(j["canonical_manifest"].dump()), j["manifest_sha256"]);
}

TEST(Prereg, SameStudyIsLeftUntouchedAndAnotherIsRefused) {
  const auto dir = test::fresh_dir("prereg_refuse");
  const auto first = prereg_for(quickstart());
  EXPECT_EQ(write_prereg(dir, first), PreregOutcome::written);
  const std::string bytes = test::read_file(dir / "prereg.json");
  EXPECT_EQ(write_prereg(dir, prereg_for(quickstart())), PreregOutcome::already_matches);
  const auto other = prereg_for(test::replace_once(quickstart(), "compression = [0.5, 0.75]",
                                                   "compression = [0.5, 0.75, 0.8]"));
  try {
    write_prereg(dir, other);
    FAIL() << "replaced a preregistration";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("already preregisters another manifest"),
              std::string::npos);
  }
  EXPECT_EQ(test::read_file(dir / "prereg.json"), bytes);
  // Only prereg.json is there: no temporary files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

TEST(Prereg, RunRefusesAManifestThatChangedAfterPlanning) {
  const auto dir = test::fresh_dir("prereg_run");
  const auto j = prereg_for(quickstart());
  write_prereg(dir, j);
  EXPECT_NO_THROW(require_prereg_match(dir, "q.toml", j["manifest_sha256"]));
  try {
    require_prereg_match(dir, "q.toml", std::string(64, '0'));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("differs from the preregistration"), std::string::npos);
  }
  EXPECT_THROW(require_prereg_match(test::fresh_dir("prereg_none"), "q.toml", "x"), InputError);
}

TEST(Prereg, GarbageIsABadInputNamingTheFile) {
  const auto dir = test::fresh_dir("prereg_garbage");
  std::ofstream(dir / "prereg.json") << "{ not json";
  try {
    load_prereg(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "prereg.json").string() + ": not valid JSON", 0),
              0u);
  }
  std::ofstream(dir / "prereg.json", std::ios::trunc) << "{\"a\": 1}";
  EXPECT_THROW(load_prereg(dir), InputError);
}

}  // namespace
}  // namespace kvaudit::manifest
