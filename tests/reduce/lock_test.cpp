// reduce refuses a study whose manifest, contracts or splits differ from the preregistration lock,
// and writes nothing when it does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

SyntheticConfig tiny() {
  SyntheticConfig c;
  c.models = {"model-a"};
  c.base = {0.8};
  c.backends = {"sdpa"};
  c.tasks = {"niah_single_1", "vt"};
  c.instances = 10;
  c.calibration = 4;
  c.test = 4;
  c.bootstrap_resamples = 200;
  return c;
}

std::string refusal(const ReduceOptions& options) {
  try {
    reduce_study(options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void rewrite_lock(const SyntheticStudy& s, const std::function<void(nlohmann::json&)>& edit) {
  const auto file = s.results_dir / "prereg.json";
  auto j = nlohmann::json::parse(read_text(file));
  edit(j);
  std::filesystem::remove(file);
  std::ofstream(file) << j.dump(2);
}

bool has_report(const SyntheticStudy& s) {
  for (const auto& e : std::filesystem::directory_iterator(s.results_dir))
    if (e.path().filename().string().rfind("report", 0) == 0 ||
        e.path().filename().string().rfind(".report", 0) == 0)
      return true;
  return false;
}

TEST(Lock, ChangedManifestIsRefusedNamingBothHashes) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  auto text = read_text(study.manifest_file);
  const std::string from = "bootstrap_resamples = 200";
  text.replace(text.find(from), from.size(), "bootstrap_resamples = 300");
  std::ofstream(study.manifest_file) << text;
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("differs from the preregistration lock"), std::string::npos) << what;
  EXPECT_NE(what.find(study.manifest_sha256), std::string::npos) << what;  // the locked hash
  EXPECT_NE(what.find("--manifest"), std::string::npos) << what;           // what to do
  EXPECT_FALSE(has_report(study));
}

TEST(Lock, EditedContractIsRefused) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) { j["contracts"][0]["epsilon"] = 0.2; });
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("epsilon"), std::string::npos) << what;
  EXPECT_FALSE(has_report(study));
}

TEST(Lock, ReorderedCandidatesAreRefused) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) {
    auto& c = j["contracts"][0]["candidates"];
    std::reverse(c.begin(), c.end());
  });
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("candidate"), std::string::npos) << what;
}

TEST(Lock, EditedSplitIsRefused) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) {
    auto& cal = j["splits"]["ruler-syn"]["vt"]["calibration"];
    auto& test = j["splits"]["ruler-syn"]["vt"]["test"];
    std::swap(cal[0], test[0]);
  });
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("splits.ruler-syn.vt"), std::string::npos) << what;
}

TEST(Lock, MissingShardsDirectoryIsBadInput) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  std::filesystem::remove_all(study.results_dir / "shards");
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("no shards directory"), std::string::npos) << what;
}

TEST(Lock, ShardOfAnotherManifestIsRefused) {
  const auto a = write_synthetic_study(fresh_test_dir("a"), tiny());
  auto other = tiny();
  other.seed = 12;
  const auto b = write_synthetic_study(fresh_test_dir("b"), other);
  const auto listing = records::list_shards(b.results_dir / "shards");
  std::filesystem::copy_file(listing.published.front(),
                             a.results_dir / "shards" / ("part-other.0.t0.pid1-r0.s0.h5"));
  const std::string what = refusal(options_for(a));
  EXPECT_NE(what.find(b.manifest_sha256), std::string::npos) << what;
}

}  // namespace
}  // namespace kvaudit::reduce::testing
