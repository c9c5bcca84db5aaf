// List parameters of the wrappers group (methods/catalog.h ParamType::real_list, method_ref_list):
// TOML arrays in the manifest, kept as canonical strings (methods/param_lists.h), written back as
// arrays by the canonical JSON (press names inlined as their configurations), so the hash follows
// meaning: number spelling does not matter, order and values do.
#include <gtest/gtest.h>

#include "suite/manifest/canonical.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

std::string manifest(const std::string& ratios, const std::string& presses) {
  return R"([study]
name = "t"
seed = 1
output_dir = "out"

[[models]]
name = "m"
path = "model.gguf"
format = "gguf"
chat_template = "chatml"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = ["vt"]
length = 1024
instances = 4

[methods.snap]
method = "snapkv"
window = 16

[methods.knorm]

[methods.comp]
method = "composed"
presses = )" +
         presses +
         R"(
compression_ratios = )" +
         ratios +
         R"(

[[grids]]
name = "g"
benchmarks = ["r"]
methods = ["comp"]
compression = [0.75]
protocols = ["query-aware"]
backends = ["sdpa"]
)";
}

TEST(WrapperLists, ArraysAreKeptAsCanonicalStringsAndHashedAsArrays) {
  const Manifest m = parse_manifest(manifest("[0.5, 0.5]", R"(["knorm", "snap"])"), "m.toml");
  const MethodConfig* comp = m.find_method("comp");
  ASSERT_NE(comp, nullptr);
  EXPECT_EQ(std::get<std::string>(comp->params.at("compression_ratios")), "0.5,0.5");
  EXPECT_EQ(std::get<std::string>(comp->params.at("presses")), "knorm,snap");
  const auto canonical = canonical_method(m, *comp);
  EXPECT_EQ(canonical.at("params").at("compression_ratios"), nlohmann::json::array({0.5, 0.5}));
  ASSERT_EQ(canonical.at("params").at("presses").size(), 2u);
  EXPECT_EQ(canonical.at("params").at("presses").at(1).at("method"), "snapkv");
}

TEST(WrapperLists, HashFollowsMeaningNotSpelling) {
  const std::string base =
      manifest_sha256(parse_manifest(manifest("[0.5, 0.5]", R"(["knorm", "snap"])"), "m.toml"));
  // Number spelling does not change the study.
  EXPECT_EQ(base, manifest_sha256(
                      parse_manifest(manifest("[5e-1, 0.50]", R"(["knorm", "snap"])"), "m.toml")));
  // The order of the presses does (kvpress applies them in turn).
  EXPECT_NE(base, manifest_sha256(
                      parse_manifest(manifest("[0.5, 0.5]", R"(["snap", "knorm"])"), "m.toml")));
}

TEST(WrapperLists, ElementsAreCheckedAtTheirPosition) {
  try {
    parse_manifest(manifest("[0.5, \"x\"]", R"(["knorm", 3])"), "m.toml");
    FAIL() << "accepted";
  } catch (const ManifestError& e) {
    const auto lines = e.lines();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("methods.comp.presses[1]: expected the name of a method configuration"),
              std::string::npos)
        << lines[0];
    EXPECT_NE(lines[1].find("methods.comp.compression_ratios[1]: expected a number"),
              std::string::npos)
        << lines[1];
  }
}

}  // namespace
}  // namespace kvaudit::manifest
