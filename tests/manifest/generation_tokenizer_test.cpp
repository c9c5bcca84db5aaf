// A RULER benchmark's `generation_tokenizer` (the cross-tokenizer pitfall, docs/MANIFEST.md):
// parsing and its errors, its place in the canonical form (the hash of every manifest without it
// is the one it had before the key existed), the plan-time path check and the plan summary line.
#include <gtest/gtest.h>

#include <sstream>

#include "suite/manifest/canonical.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/path_check.h"
#include "suite/manifest/plan_summary.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

std::string minimal_text() {
  return test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
}

// valid_minimal.toml with `line` added to its RULER benchmark.
std::string with_benchmark_line(const std::string& line) {
  return test::replace_once(minimal_text(), "instances = 4\n", "instances = 4\n" + line + "\n");
}

std::vector<std::string> errors_of(const std::string& text) {
  try {
    parse_manifest(text, "x.toml");
  } catch (const ManifestError& e) {
    return e.lines();
  }
  return {};
}

TEST(GenerationTokenizer, AbsentByDefaultAndStoredAsWrittenWhenSet) {
  EXPECT_EQ(parse_manifest(minimal_text(), "x.toml").benchmarks[0].generation_tokenizer, "");
  const Manifest m = parse_manifest(
      with_benchmark_line("generation_tokenizer = \"tok/tokenizer.model\""), "dir/x.toml");
  EXPECT_EQ(m.benchmarks[0].generation_tokenizer, "tok/tokenizer.model");
  EXPECT_EQ(m.resolve(m.benchmarks[0].generation_tokenizer),
            std::filesystem::path("dir/tok/tokenizer.model"));
}

TEST(GenerationTokenizer, WrongTypeAndEmptyPathAreErrorsWithPositions) {
  EXPECT_EQ(errors_of(with_benchmark_line("generation_tokenizer = 3")),
            std::vector<std::string>{
                "x.toml:18:24: benchmarks[0].generation_tokenizer: expected a string, found an "
                "integer"});
  EXPECT_EQ(errors_of(with_benchmark_line("generation_tokenizer = \"\"")),
            std::vector<std::string>{
                "x.toml:18:24: benchmarks[0].generation_tokenizer: must not be empty"});
}

TEST(GenerationTokenizer, RulerOnly) {
  const std::string text =
      test::replace_once(minimal_text(), "kind = \"ruler\"\ntasks = [\"niah_single_1\", \"vt\"]",
                         "kind = \"longbench\"\ntasks = [\"qasper\"]\ndata_dir = "
                         "\"lb\"\ngeneration_tokenizer = \"t\"");
  const auto errors = errors_of(text);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("benchmarks[0].generation_tokenizer: only RULER benchmarks take a "
                           "generation tokenizer"),
            std::string::npos)
      << errors[0];
}

// The SHA-256 of the seed manifests and of valid_minimal.toml as computed before
// generation_tokenizer existed (kvaudit inspect, same canonical schema): adding an optional key
// must not move a preregistered study off its lock.
TEST(GenerationTokenizer, HashOfManifestsWithoutItIsUnchanged) {
  const std::vector<std::pair<const char*, const char*>> locked = {
      {"manifests/backend-confound.toml",
       "24ad0af8b0e74a80d34d8afe9bb83a25b07baab60d63e4097ccb8b77ccc56549"},
      {"manifests/query-visibility-audit.toml",
       "e223d37055887fe042199d979f24bc616fe0f95c6870a168520e77468f15e68b"},
      // The quickstart until 2026-12-05, renamed (study name and output_dir) with it; the hash is
      // that of the renamed content.
      {"manifests/smollm2-ruler-f32.toml",
       "c94246e5a29e6be35ae10f639e38084f4a569a49fc8610902954d09c568dd654"},
      {"manifests/risk-certification.toml",
       "10ebce3ba5a22f4090f5c18ad9c575085cbe45e820f0746ce4a32145f1b047cd"},
      {"tests/manifest/valid_minimal.toml",
       "6185fc5f51605ce852689a6068949729ca4db40e6cf5b44d29dabbc990f11199"},
  };
  for (const auto& [file, sha] : locked) {
    SCOPED_TRACE(file);
    const Manifest m = load_manifest(test::source_path(file));
    EXPECT_EQ(manifest_sha256(m), sha);
    EXPECT_EQ(canonical_text(m).find("generation_tokenizer"), std::string::npos);
  }
}

TEST(GenerationTokenizer, IsPartOfTheCanonicalFormAndTheHash) {
  const Manifest without = parse_manifest(minimal_text(), "x.toml");
  const Manifest a = parse_manifest(with_benchmark_line("generation_tokenizer = \"a.gguf\""), "x");
  const Manifest b = parse_manifest(with_benchmark_line("generation_tokenizer = \"b.gguf\""), "x");
  EXPECT_EQ(canonical_json(a)["benchmarks"][0]["generation_tokenizer"], "a.gguf");
  EXPECT_NE(manifest_sha256(a), manifest_sha256(without));
  EXPECT_NE(manifest_sha256(a), manifest_sha256(b));
  // Form still does not matter: the key written first gives the same hash.
  const std::string reordered = test::replace_once(
      minimal_text(), "name = \"r\"\n", "generation_tokenizer = \"a.gguf\"\nname = \"r\"\n");
  EXPECT_EQ(manifest_sha256(parse_manifest(reordered, "y")), manifest_sha256(a));
  // Cell identities (records) do not carry paths.
  EXPECT_EQ(canonical_benchmark_identity(a.benchmarks[0]),
            canonical_benchmark_identity(without.benchmarks[0]));
}

TEST(GenerationTokenizer, PathCheckAcceptsWhatLoadTokenizerAcceptsAndNamesTheRest) {
  const auto dir = test::fresh_dir("generation_tokenizer_paths");
  std::filesystem::create_directories(dir / "empty_dir");
  std::filesystem::create_directories(dir / "spm_dir");
  test::write_file(dir / "spm_dir" / "tokenizer.model", "x");
  test::write_file(dir / "tok.json", "{}");
  test::write_file(dir / "tok.txt", "x");
  test::write_file(dir / "model.gguf", "");  // the model path of valid_minimal.toml
  auto problems_for = [&](const std::string& value) {
    const Manifest m = parse_manifest(
        with_benchmark_line("generation_tokenizer = \"" + value + "\""), dir / "m.toml");
    return check_paths(m);
  };
  EXPECT_TRUE(problems_for("spm_dir").empty());
  EXPECT_TRUE(problems_for("tok.json").empty());
  EXPECT_TRUE(problems_for("model.gguf").empty());
  const std::string file = (dir / "m.toml").string();
  const std::string at = file + ":18:24: benchmarks.r.generation_tokenizer: ";
  EXPECT_EQ(problems_for("missing.model"),
            std::vector<std::string>{at + (dir / "missing.model").string() + " does not exist"});
  EXPECT_EQ(
      problems_for("empty_dir"),
      std::vector<std::string>{at + (dir / "empty_dir").string() +
                               " is a directory with neither tokenizer.json nor tokenizer.model"});
  const auto txt = problems_for("tok.txt");
  ASSERT_EQ(txt.size(), 1u);
  EXPECT_EQ(txt[0].rfind(at + (dir / "tok.txt").string() + " is not a tokenizer", 0), 0u) << txt[0];
}

TEST(GenerationTokenizer, PitfallManifestParsesAndItsGenerationTokenizersExist) {
  const Manifest m = load_manifest(test::source_path("manifests/tokenizer-pitfall.toml"));
  ASSERT_EQ(m.benchmarks.size(), 2u);
  for (const auto& b : m.benchmarks) {
    EXPECT_FALSE(b.generation_tokenizer.empty()) << b.name;
    EXPECT_EQ(b.tasks.size(), 13u);
  }
  EXPECT_EQ(m.find_benchmark("ruler-4k-spm")->generation_tokenizer,
            "../tests/benchmarks/ruler/golden/spm_ruler");
  // The SentencePiece side is committed; the GGUF side is the fetched default model.
  for (const auto& line : check_paths(m)) {
    EXPECT_EQ(line.find("ruler-4k-spm"), std::string::npos) << line;
  }
}

TEST(GenerationTokenizer, PlanSummaryNamesTheGenerationTokenizer) {
  const Manifest m = parse_manifest(
      with_benchmark_line("generation_tokenizer = \"spm/tokenizer.model\""), "dir/x.toml");
  const Expansion ex = expand(m);
  std::ostringstream os;
  print_plan(os, m, ex, summarize(m, ex));
  EXPECT_NE(os.str().find("sized with generation_tokenizer dir/spm/tokenizer.model (no chat "
                          "template), not the models' own: see the tokenizer check"),
            std::string::npos)
      << os.str();
  std::ostringstream plain;
  const Manifest without = parse_manifest(minimal_text(), "dir/x.toml");
  const Expansion ex0 = expand(without);
  print_plan(plain, without, ex0, summarize(without, ex0));
  EXPECT_EQ(plain.str().find("generation_tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace kvaudit::manifest
