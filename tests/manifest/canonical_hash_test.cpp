// The manifest hash ignores form (key order, whitespace, comments, number spelling, set order,
// explicit defaults, inline vs standard tables) and changes with any change of meaning.
#include <gtest/gtest.h>

#include <set>

#include "suite/manifest/canonical.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

const char* kAudit = "manifests/query-visibility-audit.toml";

std::string audit_text() { return test::read_file(test::source_path(kAudit)); }
std::string hash_of(const std::string& text) {
  return manifest_sha256(parse_manifest(text, "m.toml"));
}

TEST(CanonicalHash, IsAHexSha256) {
  const std::string h = hash_of(audit_text());
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(CanonicalHash, ReformattedAndReorderedManifestHasTheSameHash) {
  const std::string reformatted = test::read_file(
      test::source_path("tests/manifest/fixtures/query-visibility-audit.reformatted.toml"));
  const Manifest a = parse_manifest(audit_text(), "a.toml");
  const Manifest b = parse_manifest(reformatted, "b.toml");
  EXPECT_EQ(canonical_text(a), canonical_text(b));
  EXPECT_EQ(manifest_sha256(a), manifest_sha256(b));
}

TEST(CanonicalHash, WhitespaceAndCommentsDoNotMatter) {
  std::string t = audit_text();
  std::string spaced;
  for (char c : t) {
    spaced += c;
    if (c == '\n') spaced += "   \n# an added comment\n";
  }
  EXPECT_EQ(hash_of(t), hash_of(spaced));
}

TEST(CanonicalHash, OperationalAndDescriptiveFieldsDoNotMatter) {
  const std::string base = audit_text();
  const std::string h = hash_of(base);
  EXPECT_EQ(h, hash_of(test::replace_once(base, "flush_every = 64", "flush_every = 1024")));
  EXPECT_EQ(h,
            hash_of(test::replace_once(base, "output_dir = \"../results/query-visibility-audit\"",
                                       "output_dir = \"/scratch/other\"")));
  EXPECT_EQ(h, hash_of(test::replace_once(base,
                                          "description = \"Seed 001: query-aware vs query-agnostic "
                                          "KV-cache eviction, RULER-8K and LongBench\"",
                                          "description = \"reworded\"")));
}

// The attention backend's keys were once called `backends` / `backend`: both spellings are read
// and mean the same, so the hash (and every unit and cell id) does not depend on the spelling.
TEST(CanonicalHash, OldAttentionBackendKeysGiveTheSameHash) {
  const std::string current =
      test::read_file(test::source_path("manifests/risk-certification.toml"));
  std::string old = current;
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\nattention_backends = [", "\nbackends = ["},
        {"\nattention_backend = \"", "\nbackend = \""}}) {
    for (std::size_t at = old.find(from); at != std::string::npos; at = old.find(from, at)) {
      old.replace(at, from.size(), to);
    }
  }
  ASSERT_NE(old, current);
  EXPECT_EQ(old.find("attention_backend"), std::string::npos);
  EXPECT_EQ(hash_of(old), hash_of(current));
}

TEST(CanonicalHash, EverySemanticChangeChangesTheHash) {
  const std::string base = audit_text();
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"compression = [0.25, 0.5, 0.75, 0.9]\nprotocols = [\"query-aware\", "
       "\"query-agnostic\"]\nattention_backends = [\"sdpa\", \"eager\"]\n\n[[grids]]",
       "compression = [0.25, 0.5, 0.75, 0.95]\nprotocols = [\"query-aware\", "
       "\"query-agnostic\"]\nattention_backends = [\"sdpa\", \"eager\"]\n\n[[grids]]"},
      {"compression = [0.25, 0.5, 0.75, 0.9]", "compression = [0.25, 0.5, 0.75]"},
      {"compression = [0.25, 0.5, 0.75, 0.9]", "retention = [0.1, 0.25, 0.5, 0.75]"},
      {"protocols = [\"query-aware\", \"query-agnostic\"]", "protocols = [\"query-agnostic\"]"},
      {"backends = [\"sdpa\", \"eager\"]", "backends = [\"sdpa\"]"},
      {"\"random\", \"knorm\", \"streaming_llm\"]", "\"random\", \"knorm\"]"},
      {"variant = \"kvpress\"            # window 64",
       "window = 32                    # window 64"},
      {"scorer = \"snapkv\"", "scorer = \"knorm\""},
      {"instances = 50                 # per task\nessay",
       "instances = 49                 # per task\nessay"},
      {"length = 8192", "length = 4096"},
      {"tasks = \"all\"                  # the 13", "tasks = [\"vt\", \"cwe\", \"fwe\"] # the 13"},
      {"seed = 20250101", "seed = 20250102"},
      {"chat_template = \"qwen2\"", "chat_template = \"chatml\""},
      {"dtype = \"bf16\"", "dtype = \"f16\""},
      {"path = \"/path/to/Llama-3.1-8B-Instruct\"", "path = \"/models/llama\""},
      {"bootstrap_resamples = 50000", "bootstrap_resamples = 10000"},
      {"over = [\"model\", \"benchmark\"]", "over = [\"model\"]"},
      {"name = \"ruler-audit\"", "name = \"ruler-grid\""},
  };
  std::set<std::string> hashes = {hash_of(base)};
  for (const auto& [from, to] : edits) {
    SCOPED_TRACE(to);
    const std::string h = hash_of(test::replace_once(base, from, to));
    EXPECT_TRUE(hashes.insert(h).second) << "hash did not change";
  }
}

TEST(CanonicalHash, CertificationContractIsPartOfTheHash) {
  const std::string base = test::read_file(test::source_path("manifests/risk-certification.toml"));
  std::set<std::string> hashes = {hash_of(base)};
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"tau = 0.10", "tau = 0.05"},
           {"epsilon = 0.05", "epsilon = 0.10"},
           {"delta = 0.05", "delta = 0.01"},
           {"candidates = [0.80, 0.75, 0.70", "candidates = [0.75, 0.70"},
       }) {
    EXPECT_TRUE(hashes.insert(hash_of(test::replace_once(base, from, to))).second) << to;
  }
}

}  // namespace
}  // namespace kvaudit::manifest
