// The artefact methods' file parameters through the manifest layer (methods/qfilter.h,
// expected_attention_stats.h, duo_attention.h): a malformed artefact is reported at the value's
// file:line:column by the plan's path check with the reader's message; duo_attention's on_the_fly
// variant, whose `pattern` defaults to "" (no file), passes the checks, reaches the factory empty
// and enters no fingerprint, while its pattern variant requires the file.
#include <gtest/gtest.h>

#include "suite/manifest/diagnostics.h"
#include "suite/manifest/input_fingerprints.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/method_configs.h"
#include "suite/manifest/path_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;

// A study directory with a GGUF model and one method config `a` (its lines start at line 20).
fs::path make_study(const std::string& name, const std::string& method_lines) {
  return test::one_method_study(name, "a", method_lines);
}

std::string absolute_text(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

TEST(ArtefactParameters, AMalformedArtefactIsReportedAtTheValue) {
  // A pattern row with one value too few (line 21 = `pattern = ...`, column 11 = the value).
  const fs::path dir =
      make_study("artefact_ragged", "method = \"duo_attention\"\npattern = \"p.tsv\"");
  test::write_file(dir / "p.tsv", "0.5\t0.25\n0.75\n");
  const Manifest m = load_manifest(dir / "study.toml");
  const auto lines = check_paths(m);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], (dir / "study.toml").string() + ":21:11: methods.a.pattern: " +
                          absolute_text(dir / "p.tsv") + ": line 2 has 1 values, the first row 2");
  // A Q-filter file that is not safetensors.
  const fs::path q =
      make_study("artefact_qfilter", "method = \"qfilter\"\nfilters = \"q.safetensors\"");
  test::write_file(q / "q.safetensors", "abc");
  const auto q_lines = check_paths(load_manifest(q / "study.toml"));
  ASSERT_EQ(q_lines.size(), 1u);
  EXPECT_NE(q_lines[0].find(":21:11: methods.a.filters: " + absolute_text(q / "q.safetensors") +
                            ": not a safetensors file"),
            std::string::npos);
}

TEST(ArtefactParameters, DuoOnTheFlyNeedsNoFile) {
  const fs::path dir =
      make_study("artefact_on_the_fly", "method = \"duo_attention\"\nvariant = \"on_the_fly\"");
  const Manifest m = load_manifest(dir / "study.toml");
  EXPECT_TRUE(check_paths(m).empty());
  EXPECT_EQ(std::get<std::string>(method_configs(m).at(0).params.at("pattern")), "");
  for (const auto& f : list_input_files(m)) EXPECT_NE(f.input, "methods.a.pattern");
}

TEST(ArtefactParameters, DuoPatternRequiresTheFile) {
  const fs::path dir = make_study("artefact_pattern_missing", "method = \"duo_attention\"");
  try {
    load_manifest(dir / "study.toml");
    FAIL() << "accepted a pattern variant without its file";
  } catch (const ManifestError& e) {
    ASSERT_EQ(e.lines().size(), 1u);
    EXPECT_NE(e.lines()[0].find("methods.a.pattern: missing required parameter"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace kvaudit::manifest
