// reduce refuses a study whose lock was edited, whose manifest, contracts or splits differ from the
// preregistration lock, or whose model files changed since the plan, and writes nothing when it
// does; a model file that is absent is noted and skipped.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/records/shard_checksum.h"
#include "suite/reduce/lock_check.h"
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
  // The shard with its checksum sidecar (both keep their names: the sidecar names the shard).
  const auto& shard = listing.published.front();
  std::filesystem::copy_file(shard, a.results_dir / "shards" / shard.filename());
  const auto sidecar = records::checksum_path(shard);
  std::filesystem::copy_file(sidecar, a.results_dir / "shards" / sidecar.filename());
  const std::string what = refusal(options_for(a));
  EXPECT_NE(what.find(b.manifest_sha256), std::string::npos) << what;
}

TEST(Lock, EditedCanonicalManifestIsRefusedNamingTheField) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) { j["canonical_manifest"]["study"]["seed"] = 99; });
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("prereg.json: canonical_manifest: hashes to "), std::string::npos) << what;
  EXPECT_FALSE(has_report(study));
}

TEST(Lock, CountsOfTheWrongTypeAreRefusedNamingTheField) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) { j["counts"] = "880"; });
  const std::string what = refusal(options_for(study));
  EXPECT_NE(what.find("prereg.json: counts: must be an object, found string"), std::string::npos)
      << what;
  EXPECT_FALSE(has_report(study));
}

TEST(Lock, ALockWithoutFingerprintsOfSchemaOneIsStillReduced) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  rewrite_lock(study, [](nlohmann::json& j) {
    j.erase("inputs");
    j["kvaudit_prereg_schema"] = 1;
  });
  EXPECT_EQ(refusal(options_for(study)), "");
  EXPECT_TRUE(has_report(study));
}

TEST(Lock, AChangedModelFileIsRefusedAndAnAbsentOneNoted) {
  const auto study = write_synthetic_study(fresh_test_dir(), tiny());
  const auto m = manifest::load_manifest(study.manifest_file);
  const auto lock = nlohmann::json::parse(read_text(study.results_dir / "prereg.json"));
  const auto lock_file = study.results_dir / "prereg.json";
  std::ostringstream notes;
  EXPECT_NO_THROW(require_same_inputs(lock, lock_file, m, notes));
  const auto model = study.manifest_file.parent_path() / "models" / "model-a.gguf";
  std::ofstream(model, std::ios::binary) << "swapped";
  try {
    require_same_inputs(lock, lock_file, m, notes);
    FAIL() << "a swapped model was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(model.string()), std::string::npos) << what;
    EXPECT_NE(what.find("locked 0 bytes, sha256 " + sha256_hex("")), std::string::npos) << what;
    EXPECT_NE(what.find("now 7 bytes, sha256 " + sha256_hex("swapped")), std::string::npos) << what;
  }
  std::filesystem::remove(model);
  EXPECT_NO_THROW(require_same_inputs(lock, lock_file, m, notes));
  EXPECT_NE(notes.str().find("models.model-a.path file model-a.gguf is absent here"),
            std::string::npos)
      << notes.str();
}

}  // namespace
}  // namespace kvaudit::reduce::testing
