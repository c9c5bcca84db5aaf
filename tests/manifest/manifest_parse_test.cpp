// Valid manifests: defaults, set normalisation, relative paths, and the seed manifests.
#include <gtest/gtest.h>

#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/path_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

Manifest minimal() {
  return parse_manifest(test::read_file(test::source_path("tests/manifest/valid_minimal.toml")),
                        "dir/valid_minimal.toml");
}

TEST(ManifestParse, MinimalManifestFillsDefaults) {
  const Manifest m = minimal();
  EXPECT_EQ(m.study.name, "t");
  EXPECT_EQ(m.study.seed, 1u);
  ASSERT_EQ(m.models.size(), 1u);
  EXPECT_EQ(m.models[0].dtype, "bf16");
  const MethodConfig* snap = m.find_method("snapkv");
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->variant, "kvpress");
  EXPECT_EQ(std::get<std::int64_t>(snap->params.at("window")), 64);
  EXPECT_EQ(std::get<std::int64_t>(snap->params.at("kernel_size")), 5);
  EXPECT_EQ(std::get<std::string>(snap->params.at("pooling")), "avg");
  EXPECT_EQ(m.statistics.seed, m.study.seed);
  EXPECT_EQ(m.statistics.bootstrap_resamples, 50000);
  EXPECT_EQ(m.sharding.flush_every, 64);
  ASSERT_EQ(m.grids.size(), 1u);
  EXPECT_EQ(m.grids[0].protocols, (std::vector<std::string>{"query-agnostic", "query-aware"}));
  EXPECT_EQ(m.grids[0].models, (std::vector<std::string>{"m"}));
}

TEST(ManifestParse, OriginalSnapKVVariantHasItsOwnDefaults) {
  std::string text = test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
  text =
      test::replace_once(text, "[methods.snapkv]\n", "[methods.snapkv]\nvariant = \"original\"\n");
  const Manifest m = parse_manifest(text, "x.toml");
  const MethodConfig* snap = m.find_method("snapkv");
  EXPECT_EQ(std::get<std::int64_t>(snap->params.at("window")), 32);
  EXPECT_EQ(std::get<std::int64_t>(snap->params.at("kernel_size")), 7);
  EXPECT_EQ(std::get<std::string>(snap->params.at("pooling")), "max");
}

TEST(ManifestParse, IntegerAcceptedWhereANumberIsExpected) {
  std::string text = test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
  text = test::replace_once(text, "compression = [0.5]", "compression = [0, 0.5]");
  const Manifest m = parse_manifest(text, "x.toml");
  EXPECT_EQ(m.grids[0].ratios, (std::vector<double>{0.0, 0.5}));
}

TEST(ManifestParse, AllTasksExpandsToTheCatalogue) {
  std::string text = test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
  text = test::replace_once(text, "tasks = [\"niah_single_1\", \"vt\"]",
                            "tasks = \"all\"\nsquad = \"s.json\"\nhotpotqa = \"h.json\"");
  const Manifest m = parse_manifest(text, "x.toml");
  EXPECT_EQ(m.benchmarks[0].tasks.size(), 13u);
}

TEST(ManifestParse, RelativePathsResolveAgainstTheManifestDirectory) {
  const Manifest m = minimal();
  EXPECT_EQ(m.resolve(m.models[0].path), std::filesystem::path("dir/model.gguf"));
  EXPECT_EQ(m.resolve("/abs/x"), std::filesystem::path("/abs/x"));
}

TEST(ManifestParse, SeedManifestsParse) {
  for (const char* f : {"manifests/quickstart.toml", "manifests/smollm2-ruler-f32.toml",
                        "manifests/query-visibility-audit.toml",
                        "manifests/risk-certification.toml", "manifests/backend-confound.toml"}) {
    SCOPED_TRACE(f);
    EXPECT_NO_THROW(load_manifest(test::source_path(f)));
  }
}

TEST(ManifestParse, RiskCertificationEncodesSeed000Contract) {
  const Manifest m = load_manifest(test::source_path("manifests/risk-certification.toml"));
  ASSERT_EQ(m.certifications.size(), 9u);
  const std::vector<double> retention = {0.80, 0.75, 0.70, 0.65, 0.60, 0.55, 0.50,
                                         0.45, 0.40, 0.35, 0.30, 0.25, 0.20};
  for (const auto& c : m.certifications) {
    EXPECT_DOUBLE_EQ(c.tau, 0.10);
    EXPECT_DOUBLE_EQ(c.epsilon, 0.05);
    EXPECT_DOUBLE_EQ(c.delta, 0.05);
    EXPECT_EQ(c.calibration, 100);
    EXPECT_EQ(c.test, 100);
    if (c.method != "refreekv") {
      EXPECT_EQ(c.candidates, retention);
    }
  }
  EXPECT_EQ(m.find_benchmark("longbench-32k")->tasks.size(), 12u);
  EXPECT_EQ(m.find_benchmark("ruler-32k")->tasks.size(), 13u);
}

TEST(PathCheck, ReportsMissingModelAndDataPathsWithPositions) {
  const Manifest m = load_manifest(test::source_path("manifests/query-visibility-audit.toml"));
  const auto problems = check_paths(m);
  // Three placeholder model paths, SQuAD, HotpotQA and the LongBench data directory.
  ASSERT_EQ(problems.size(), 6u);
  const std::string file = test::source_path("manifests/query-visibility-audit.toml").string();
  EXPECT_EQ(problems[0].rfind(file + ":", 0), 0u);
  EXPECT_NE(problems[0].find("models.deepseek-r1-distill-qwen-7b.path: model "
                             "'deepseek-r1-distill-qwen-7b': /path/to/DeepSeek-R1-Distill-Qwen-7B "
                             "does not exist"),
            std::string::npos)
      << problems[0];
}

TEST(PathCheck, QuickstartModelIsFetchedBySetup) {
  const Manifest m = load_manifest(test::source_path("manifests/quickstart.toml"));
  const auto problems = check_paths(m);
  if (!std::filesystem::exists(m.resolve(m.models[0].path))) {
    GTEST_SKIP() << "the default model is not fetched here (run tools/fetch_default_model.sh)";
  }
  EXPECT_TRUE(problems.empty()) << problems.front();
}

}  // namespace
}  // namespace kvaudit::manifest
