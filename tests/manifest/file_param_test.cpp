// File parameters of method configs (methods::ParamType::path; e.g. headkv's head_scores): kept
// as written in the manifest (the study hash does not depend on where the study lives), handed to
// the factory resolved against the manifest's directory, checked at plan time with the value's
// file:line:column (missing, not a file, content rejected by the parameter's check_file), and
// fingerprinted into the lock so that a changed file refuses the run.
#include <gtest/gtest.h>

#include <sstream>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/input_fingerprints.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/method_configs.h"
#include "suite/manifest/path_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScores = R"({"0-0": [1, 2], "0-1": 0.5, "1-0": 0, "1-1": [3]})";

// A study directory with a GGUF model and a headkv config naming scores/h.json (line 21, col 15).
fs::path make_study(const std::string& name, const char* scores = kScores) {
  const fs::path dir =
      test::one_method_study(name, "hk", "method = \"headkv\"\nhead_scores = \"scores/h.json\"");
  fs::create_directories(dir / "scores");
  if (scores != nullptr) test::write_file(dir / "scores" / "h.json", scores);
  return dir;
}

std::string manifest_name(const fs::path& dir) { return (dir / "study.toml").string(); }

TEST(FileParameters, KeptAsWrittenAndResolvedForTheFactory) {
  const fs::path dir = make_study("fileparam_resolved");
  const Manifest m = load_manifest(dir / "study.toml");
  ASSERT_EQ(m.methods.size(), 1u);
  EXPECT_EQ(std::get<std::string>(m.methods[0].params.at("head_scores")), "scores/h.json");
  EXPECT_EQ(m.methods[0].param_pos.at("head_scores").line, 21);
  const auto configs = method_configs(m);
  EXPECT_EQ(std::get<std::string>(configs[0].params.at("head_scores")),
            fs::absolute(dir / "scores" / "h.json").lexically_normal().string());
  EXPECT_TRUE(check_paths(m).empty());
  // The manifest hash keeps the path as written: the same study in another directory hashes
  // the same.
  const fs::path other = make_study("fileparam_resolved_elsewhere");
  EXPECT_EQ(canonical_json(load_manifest(other / "study.toml")).dump(), canonical_json(m).dump());
}

TEST(FileParameters, AMissingFileIsReportedAtTheValue) {
  const fs::path dir = make_study("fileparam_missing", nullptr);
  const Manifest m = load_manifest(dir / "study.toml");
  const auto lines = check_paths(m);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], manifest_name(dir) + ":21:15: methods.hk.head_scores: " +
                          fs::absolute(dir / "scores" / "h.json").lexically_normal().string() +
                          " does not exist");
  fs::create_directories(dir / "scores" / "h.json");  // a directory is not a file
  EXPECT_NE(check_paths(m).at(0).find("h.json is not a regular file"), std::string::npos);
}

TEST(FileParameters, ContentRejectedByTheMethodsCheckIsReportedAtTheValue) {
  const fs::path dir = make_study("fileparam_content", R"({"0-0": 1, "0-1": -2})");
  const Manifest m = load_manifest(dir / "study.toml");
  const auto lines = check_paths(m);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], manifest_name(dir) + ":21:15: methods.hk.head_scores: " +
                          fs::absolute(dir / "scores" / "h.json").lexically_normal().string() +
                          ": value of '0-1' is negative (-2.000000)");
}

TEST(FileParameters, TheFileIsFingerprintedAndAChangeRefusesTheRun) {
  const fs::path dir = make_study("fileparam_fingerprint");
  const Manifest m = load_manifest(dir / "study.toml");
  std::vector<std::string> got;
  for (const auto& f : list_input_files(m)) got.push_back(f.input + " " + f.file);
  EXPECT_EQ(got,
            (std::vector<std::string>{"models.m.path m.gguf", "methods.hk.head_scores h.json"}));
  const auto locked = fingerprint_inputs(m, nullptr);
  ASSERT_EQ(locked.size(), 2u);
  EXPECT_EQ(locked[1].print.sha256, sha256_hex(kScores));
  const nlohmann::json lock{{"kvaudit_prereg_schema", 2}, {"inputs", inputs_json(locked)}};
  std::ostringstream notes;
  EXPECT_NO_THROW(
      require_same_inputs(lock, "prereg.json", m, AbsentInput::refuse, "nothing was run", notes));
  test::write_file(dir / "scores" / "h.json", R"({"0-0": 9, "0-1": 1, "1-0": 1, "1-1": 1})");
  try {
    require_same_inputs(lock, "prereg.json", m, AbsentInput::refuse, "nothing was run", notes);
    ADD_FAILURE() << "a changed head-score file was not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("h.json (methods.hk.head_scores): changed since the "
                                         "study was planned"),
              std::string::npos)
        << e.what();
  }
}

// A directory parameter (ParamSpec::directory_files; restorekv's PEFT `adapter`): a directory
// holding each named file, checked as a whole by check_file, each file fingerprinted.
TEST(FileParameters, ADirectoryParameterNeedsItsFilesAndFingerprintsEach) {
  const fs::path source = test::source_path("tests/golden/artefacts/restorekv_tiny_llama");
  const fs::path dir = test::one_method_study(
      "fileparam_directory", "rk",
      "method = \"restorekv\"\nrestore_embeddings = \"a/restore_embeddings.safetensors\"\n"
      "adapter = \"a\"");
  fs::create_directories(dir / "a");
  for (const char* f : {"restore_embeddings.safetensors", "adapter_config.json"})
    fs::copy_file(source / f, dir / "a" / f);
  const Manifest m = load_manifest(dir / "study.toml");
  const std::string at = fs::absolute(dir / "a").lexically_normal().string();
  auto lines = check_paths(m);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("methods.rk.adapter: " + at + " has no adapter_model.safetensors"),
            std::string::npos)
      << lines[0];
  fs::copy_file(source / "adapter_model.safetensors", dir / "a" / "adapter_model.safetensors");
  EXPECT_TRUE(check_paths(m).empty());
  std::vector<std::string> got;
  for (const auto& f : list_input_files(m)) got.push_back(f.input + " " + f.file);
  EXPECT_EQ(got, (std::vector<std::string>{"models.m.path m.gguf",
                                           "methods.rk.restore_embeddings "
                                           "restore_embeddings.safetensors",
                                           "methods.rk.adapter adapter_config.json",
                                           "methods.rk.adapter adapter_model.safetensors"}));
  // The directory's content is checked as a whole (here: its config is not JSON).
  test::write_file(dir / "a" / "adapter_config.json", "not json");
  lines = check_paths(m);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("methods.rk.adapter: " + at + ": adapter_config.json"), std::string::npos)
      << lines[0];
  // A file is not a directory.
  const fs::path other = test::one_method_study("fileparam_directory_file", "rk",
                                                "method = \"restorekv\"\nrestore_embeddings = "
                                                "\"e.safetensors\"\nadapter = \"e.safetensors\"");
  fs::copy_file(source / "restore_embeddings.safetensors", other / "e.safetensors");
  lines = check_paths(load_manifest(other / "study.toml"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("e.safetensors is not a directory"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace kvaudit::manifest
