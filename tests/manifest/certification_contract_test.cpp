// The contract kinds of a [[certification]] block (risk / risks, bound, loss_epsilon, procedure,
// starts, per_task, sequential; docs/MANIFEST.md): parsed, validated with file:line:column errors
// naming the field and the allowed values, hashed only when they differ from the original
// contract (so every existing manifest keeps its hash), carried into the lock and type-checked
// there.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "base/errors.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/plan_summary.h"
#include "suite/manifest/prereg.h"
#include "suite/manifest/prereg_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

// valid_minimal.toml with a second candidate (so that multistart has room) and `extra` appended
// to its certification block (the last table of the file).
std::string minimal(const std::string& extra = "") {
  std::string t = test::read_file(test::source_path("tests/manifest/valid_minimal.toml"));
  t = test::replace_once(t, "compression = [0.5]", "compression = [0.25, 0.5]");
  t = test::replace_once(t, "candidates = [0.5]", "candidates = [0.25, 0.5]");
  return t + extra;
}

// The line (1-based) of the first line of `extra` in minimal(extra).
int extra_line() {
  const std::string t = minimal();
  return static_cast<int>(std::count(t.begin(), t.end(), '\n')) + 1;
}

std::vector<std::string> errors_of(const std::string& text) {
  try {
    parse_manifest(text, "c.toml");
  } catch (const ManifestError& e) {
    return e.lines();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {};
}

std::string at(int line, int column) {
  return "c.toml:" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

const Certification& block(const Manifest& m) { return m.certifications.at(0); }

TEST(CertificationContract, DefaultsAreTheOriginalContract) {
  const Manifest m = parse_manifest(minimal(), "c.toml");
  const Certification& c = block(m);
  EXPECT_EQ(c.risks, std::vector<std::string>{"violation"});
  EXPECT_EQ(c.procedure, "fixed_sequence");
  EXPECT_EQ(c.starts, 0);
  EXPECT_EQ(c.bound, "");
  EXPECT_FALSE(c.per_task);
  EXPECT_FALSE(c.sequential);
  EXPECT_TRUE(c.default_contract());
  const auto j = canonical_certification(c);
  for (const char* key :
       {"risks", "bound", "loss_epsilon", "procedure", "starts", "per_task", "sequential"})
    EXPECT_FALSE(j.contains(key)) << key;
}

TEST(CertificationContract, ExplicitDefaultsKeepTheHash) {
  const std::string h = manifest_sha256(parse_manifest(minimal(), "c.toml"));
  for (const char* extra :
       {"risk = \"violation\"\n", "risks = [\"violation\"]\n", "procedure = \"fixed_sequence\"\n",
        "per_task = false\n", "sequential = false\n",
        "risk = \"violation\"\nprocedure = \"fixed_sequence\"\nper_task = false\nsequential = "
        "false\n"}) {
    SCOPED_TRACE(extra);
    EXPECT_EQ(manifest_sha256(parse_manifest(minimal(extra), "c.toml")), h);
  }
}

// The hashes kvaudit gave these files before the contract kinds existed (kvaudit inspect, commit
// dcba4ef): a manifest that does not use the new keys must keep its hash and with it its lock and
// every id.
TEST(CertificationContract, ExistingManifestsKeepTheirHashes) {
  const std::vector<std::pair<const char*, const char*>> pinned = {
      {"manifests/backend-confound.toml",
       "24ad0af8b0e74a80d34d8afe9bb83a25b07baab60d63e4097ccb8b77ccc56549"},
      {"manifests/query-visibility-audit.toml",
       "e223d37055887fe042199d979f24bc616fe0f95c6870a168520e77468f15e68b"},
      // The quickstart until 2026-12-05, renamed (study name and output_dir) with it; the hash is
      // that of the renamed content.
      {"manifests/smollm2-ruler-f32.toml",
       "c94246e5a29e6be35ae10f639e38084f4a569a49fc8610902954d09c568dd654"},
      {"manifests/quickstart.toml",
       "29ffebb6e0b2f260c4a09d642abca4ecfd9bbe8d57b4ceff683a8e7778691fbb"},
      {"manifests/risk-certification.toml",
       "10ebce3ba5a22f4090f5c18ad9c575085cbe45e820f0746ce4a32145f1b047cd"},
      {"manifests/tokenizer-pitfall.toml",
       "3a2e322496cdcc2f869d1310322c159a2f36e7167db685135ea9b2460176c02a"},
      {"tests/manifest/valid_minimal.toml",
       "6185fc5f51605ce852689a6068949729ca4db40e6cf5b44d29dabbc990f11199"},
  };
  for (const auto& [file, hash] : pinned) {
    SCOPED_TRACE(file);
    const std::string text = test::read_file(test::source_path(file));
    const Manifest m = parse_manifest(text, file);
    EXPECT_EQ(manifest_sha256(m), hash);
  }
}

TEST(CertificationContract, EveryKindIsParsedAndHashed) {
  const Manifest m = parse_manifest(minimal("risks = [\"mean_loss\", \"violation\"]\n"
                                            "bound = \"wsr\"\nloss_epsilon = 0.02\n"
                                            "procedure = \"fixed_sequence_multistart\"\n"
                                            "starts = 2\nper_task = true\n"),
                                    "c.toml");
  const Certification& c = block(m);
  EXPECT_EQ(c.risks, (std::vector<std::string>{"violation", "mean_loss"}));
  EXPECT_EQ(c.bound, "wsr");
  EXPECT_EQ(c.loss_epsilon, 0.02);
  EXPECT_EQ(c.epsilon, 0.05);
  EXPECT_EQ(c.procedure, "fixed_sequence_multistart");
  EXPECT_EQ(c.starts, 2);
  EXPECT_TRUE(c.per_task);
  EXPECT_FALSE(c.sequential);
  EXPECT_FALSE(c.default_contract());
  const auto j = canonical_certification(c);
  EXPECT_EQ(j["risks"], nlohmann::json({"violation", "mean_loss"}));
  EXPECT_EQ(j["bound"], "wsr");
  EXPECT_EQ(j["loss_epsilon"], 0.02);
  EXPECT_EQ(j["procedure"], "fixed_sequence_multistart");
  EXPECT_EQ(j["starts"], 2);
  EXPECT_EQ(j["per_task"], true);
  EXPECT_FALSE(j.contains("sequential"));

  // Sequential calibration: one aggregate risk along the fixed sequence (either risk alone).
  for (const std::string risk : {"", "risk = \"mean_loss\"\n"}) {
    std::string text = minimal(risk + "sequential = true\n");
    if (!risk.empty()) text = test::replace_once(text, "tau = 0.1\n", "");
    const Manifest s = parse_manifest(text, "c.toml");
    EXPECT_TRUE(block(s).sequential);
    EXPECT_EQ(canonical_certification(block(s))["sequential"], true);
  }
}

TEST(CertificationContract, MeanLossAloneNeedsNoTauAndDefaultsToHoeffdingBentkus) {
  const std::string text = test::replace_once(minimal("risk = \"mean_loss\"\n"), "tau = 0.1\n", "");
  const Certification c = block(parse_manifest(text, "c.toml"));
  EXPECT_EQ(c.risks, std::vector<std::string>{"mean_loss"});
  EXPECT_EQ(c.bound, "hoeffding_bentkus");
  EXPECT_EQ(c.loss_epsilon, c.epsilon);
  EXPECT_EQ(c.tau, 0);
  const auto j = canonical_certification(c);
  EXPECT_EQ(j["bound"], "hoeffding_bentkus");
  EXPECT_FALSE(j.contains("loss_epsilon"));  // the level is epsilon
  // Spelling and order of the risks do not change the hash; the default bound written out
  // neither.
  const std::string h = manifest_sha256(parse_manifest(text, "c.toml"));
  EXPECT_EQ(h, manifest_sha256(
                   parse_manifest(test::replace_once(minimal("risks = [\"mean_loss\"]\nbound = "
                                                             "\"hoeffding_bentkus\"\n"),
                                                     "tau = 0.1\n", ""),
                                  "c.toml")));
  const std::string joint = minimal("risks = [\"violation\", \"mean_loss\"]\n");
  EXPECT_EQ(
      manifest_sha256(parse_manifest(joint, "c.toml")),
      manifest_sha256(parse_manifest(
          minimal("risks = [\"mean_loss\", \"violation\"]\nloss_epsilon = 0.05\n"), "c.toml")));
}

TEST(CertificationContract, EveryChangeOfKindChangesTheHash) {
  std::set<std::string> hashes = {manifest_sha256(parse_manifest(minimal(), "c.toml"))};
  const std::string no_tau = "";
  for (const std::string& extra : std::vector<std::string>{
           "risks = [\"violation\", \"mean_loss\"]\n",
           "risks = [\"violation\", \"mean_loss\"]\nbound = \"wsr\"\n",
           "risks = [\"violation\", \"mean_loss\"]\nloss_epsilon = 0.01\n",
           "procedure = \"holm\"\n",
           "procedure = \"bonferroni\"\n",
           "procedure = \"fixed_sequence_multistart\"\nstarts = 1\n",
           "procedure = \"fixed_sequence_multistart\"\nstarts = 2\n",
           "per_task = true\n",
           "sequential = true\n",
       }) {
    SCOPED_TRACE(extra);
    EXPECT_TRUE(hashes.insert(manifest_sha256(parse_manifest(minimal(extra), "c.toml"))).second);
  }
  EXPECT_TRUE(
      hashes
          .insert(manifest_sha256(parse_manifest(
              test::replace_once(minimal("risk = \"mean_loss\"\n"), "tau = 0.1\n", ""), "c.toml")))
          .second);
}

TEST(CertificationContract, BadValuesNameFileLineFieldAndAllowedValues) {
  const int l = extra_line();
  const std::string f = "certification[0].";
  struct Case {
    std::string extra;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"risk = \"foo\"\n",
            at(l, 8) + f + "risk: unknown risk 'foo' (expected one of: violation, mean_loss)"},
           {"risks = [\"violation\", \"foo\"]\n",
            at(l, 23) + f + "risks[1]: unknown risk 'foo' (expected one of: violation, mean_loss)"},
           // A risk in error raises no follow-on error about the keys that depend on it.
           {"risk = \"foo\"\nbound = \"wsr\"\nloss_epsilon = 0.1\n",
            at(l, 8) + f + "risk: unknown risk 'foo' (expected one of: violation, mean_loss)"},
           {"risks = []\n", at(l, 9) + f + "risks: empty list; at least one risk is needed"},
           {"risk = \"violation\"\nrisks = [\"violation\"]\n",
            at(l + 1, 9) + f +
                "risks: give either risk (one risk) or risks (several, certified jointly), not "
                "both"},
           {"bound = \"wsr\"\n",
            at(l, 9) + f +
                "bound: a bound applies to the mean_loss risk only (this block's risks: "
                "violation; allowed bounds with risk = \"mean_loss\": hoeffding_bentkus, wsr)"},
           {"risk = \"mean_loss\"\nbound = \"bernstein\"\n",
            at(l - 5, 7) + f +
                "tau: tau defines the violation risk, which this block does not certify (risks: "
                "mean_loss); remove it\n" +
                at(l + 1, 9) + f +
                "bound: unknown mean-loss bound 'bernstein' (expected one of: "
                "hoeffding_bentkus, wsr)"},
           {"loss_epsilon = 0.1\n",
            at(l, 16) + f +
                "loss_epsilon: loss_epsilon is the level of the mean_loss risk, which this block "
                "does not certify (risks: violation)"},
           {"risks = [\"violation\", \"mean_loss\"]\nloss_epsilon = 1.5\n",
            at(l + 1, 16) + f + "loss_epsilon: 1.5 is outside (0, 1)"},
           {"procedure = \"sequential\"\n",
            at(l, 13) + f +
                "procedure: unknown procedure 'sequential' (expected one of: fixed_sequence, "
                "fixed_sequence_multistart, bonferroni, holm)"},
           {"procedure = \"multi\"\nstarts = 2\n",
            at(l, 13) + f +
                "procedure: unknown procedure 'multi' (expected one of: fixed_sequence, "
                "fixed_sequence_multistart, bonferroni, holm)"},
           {"procedure = \"fixed_sequence_multistart\"\n",
            at(l - 13, 1) + f + "starts: missing required key"},
           {"procedure = \"fixed_sequence_multistart\"\nstarts = 0\n",
            at(l + 1, 10) + f +
                "starts: 0 start points is outside [1, 2] (the block's 2 candidates)"},
           {"procedure = \"fixed_sequence_multistart\"\nstarts = 3\n",
            at(l + 1, 10) + f +
                "starts: 3 start points is outside [1, 2] (the block's 2 candidates)"},
           {"starts = 2\n",
            at(l, 10) + f +
                "starts: starts applies to procedure = \"fixed_sequence_multistart\" only (this "
                "block's procedure: fixed_sequence)"},
           {"per_task = \"yes\"\n",
            at(l, 12) + f + "per_task: expected true or false, found a string"},
           {"sequential = 1\n",
            at(l, 14) + f + "sequential: expected true or false, found an integer"},
           {"sequential = true\nper_task = true\n",
            at(l, 14) + f +
                "sequential: sequential calibration certifies one aggregate risk along the fixed "
                "sequence; it cannot be combined with per_task = true"},
           {"sequential = true\nprocedure = \"holm\"\n",
            at(l, 14) + f +
                "sequential: sequential calibration certifies one aggregate risk along the fixed "
                "sequence; it cannot be combined with procedure = \"holm\""},
           {"risks = [\"violation\", \"mean_loss\"]\nsequential = true\n",
            at(l + 1, 14) + f +
                "sequential: sequential calibration certifies one aggregate risk along the fixed "
                "sequence; it cannot be combined with a joint certificate of two risks"},
           {"risk = \"mean_loss\"\n",
            at(l - 5, 7) + f +
                "tau: tau defines the violation risk, which this block does not certify (risks: "
                "mean_loss); remove it"},
       }) {
    SCOPED_TRACE(c.extra);
    std::vector<std::string> expected;
    std::istringstream lines(c.expected);
    for (std::string line; std::getline(lines, line);) expected.push_back(line);
    EXPECT_EQ(errors_of(minimal(c.extra)), expected);
  }
}

TEST(CertificationContract, UnknownKeyListsTheNewKeys) {
  const auto lines = errors_of(minimal("risk_level = 0.1\n"));
  ASSERT_EQ(lines.size(), 1u);
  for (const char* key : {"risk, risks, bound, loss_epsilon, procedure, starts, per_task, "
                          "sequential"})
    EXPECT_NE(lines[0].find(key), std::string::npos) << lines[0];
}

nlohmann::json lock_of(const std::string& text) {
  const Manifest m = parse_manifest(text, "c.toml");
  const Expansion ex = expand(m);
  return make_prereg(m, ex, summarize(m, ex), {});
}

TEST(CertificationContract, TheLockCarriesTheKindAndChecksItsTypes) {
  const std::string text =
      minimal("risks = [\"violation\", \"mean_loss\"]\nprocedure = \"holm\"\nper_task = true\n");
  auto lock = lock_of(text);
  const auto& contract = lock["contracts"][0];
  EXPECT_EQ(contract["risks"], nlohmann::json({"violation", "mean_loss"}));
  EXPECT_EQ(contract["bound"], "hoeffding_bentkus");
  EXPECT_EQ(contract["procedure"], "holm");
  EXPECT_EQ(contract["per_task"], true);
  EXPECT_NO_THROW(verify_prereg(lock, "prereg.json"));
  // The original contract's lock has none of the fields.
  const auto plain = lock_of(minimal());
  EXPECT_FALSE(plain["contracts"][0].contains("procedure"));
  EXPECT_NO_THROW(verify_prereg(plain, "prereg.json"));
  // A field of the wrong type is a damaged lock.
  for (const auto& [key, bad] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"per_task", "yes"}, {"procedure", 3}, {"risks", "violation"}, {"starts", -1}}) {
    SCOPED_TRACE(key);
    auto damaged = lock;
    damaged["contracts"][0][key] = bad;
    try {
      verify_prereg(damaged, "prereg.json");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("contracts[0]." + key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvaudit::manifest
