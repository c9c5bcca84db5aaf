// The fingerprints of a study's inputs (suite/manifest/input_fingerprints.h) and the whole-lock
// verification (suite/manifest/prereg_check.h): which files are fingerprinted, that a changed,
// added or removed file is refused naming it and both fingerprints, that reduce's absent-file case
// is a note, that a schema-1 lock is still read, and that an edited lock is refused naming the
// field.
#include "suite/manifest/input_fingerprints.h"

#include <gtest/gtest.h>

#include <sstream>

#include "base/errors.h"
#include "suite/common/file_fingerprint.h"
#include "suite/common/sha256.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/plan_summary.h"
#include "suite/manifest/prereg.h"
#include "suite/manifest/prereg_check.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A study directory: an HF model with a sharded checkpoint, a GGUF model, a LongBench data_dir and
// a RULER essay file.
struct Study {
  fs::path dir, manifest;
};

Study make_study(const std::string& name) {
  Study s;
  s.dir = test::fresh_dir(name);
  const fs::path hf = s.dir / "hf";
  fs::create_directories(hf);
  test::write_file(hf / "config.json", "{\"a\": 1}");
  test::write_file(hf / "tokenizer.json", "{\"t\": 1}");
  test::write_file(hf / "model.safetensors.index.json",
                   R"({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors",
                       "z": "s1.safetensors"}})");
  test::write_file(hf / "s1.safetensors", "shard one");
  test::write_file(hf / "s2.safetensors", "shard two");
  test::write_file(hf / "model.safetensors", "not read: the index wins");
  test::write_file(hf / "README.md", "not read by the loader");
  test::write_file(s.dir / "m.gguf", "gguf bytes");
  fs::create_directories(s.dir / "lb");
  test::write_file(s.dir / "lb" / "qasper.jsonl", "{}\n");
  test::write_file(s.dir / "lb" / "other.jsonl", "not a task of the study\n");
  test::write_file(s.dir / "essay.txt", "an essay");
  s.manifest = s.dir / "study.toml";
  test::write_file(s.manifest, R"([study]
name = "fp"
seed = 3
output_dir = "out"

[[models]]
name = "hf-model"
path = "hf"
format = "hf"
chat_template = "llama3"

[[models]]
name = "gguf-model"
path = "m.gguf"
format = "gguf"
chat_template = "chatml"

[[benchmarks]]
name = "lb"
kind = "longbench"
tasks = ["qasper"]
length = 4096
instances = 2
data_dir = "lb"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = ["niah_single_1"]
length = 1024
instances = 2
essay = "essay.txt"

[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["lb", "r"]
methods = ["knorm"]
compression = [0.5]
protocols = ["query-aware"]
attention_backends = ["sdpa"]
)");
  return s;
}

json lock_of(const Manifest& m) {
  const Expansion ex = expand(m);
  return make_prereg(m, ex, summarize(m, ex), fingerprint_inputs(m, nullptr));
}

std::string refusal(const json& lock, const Manifest& m, AbsentInput absent, std::string* notes) {
  std::ostringstream out;
  try {
    require_same_inputs(lock, "prereg.json", m, absent, "nothing was run", out);
  } catch (const InputError& e) {
    if (notes) *notes = out.str();
    return e.what();
  }
  if (notes) *notes = out.str();
  return "";
}

TEST(FileFingerprint, StreamsTheBytesThroughSha256) {
  const auto dir = test::fresh_dir("fp_stream");
  test::write_file(dir / "abc", "abc");
  const FileFingerprint f = fingerprint_file(dir / "abc");
  EXPECT_EQ(f.bytes, 3u);
  EXPECT_EQ(f.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // More than one 1 MiB block.
  std::string big(3 * (1 << 20) + 17, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  test::write_file(dir / "big", big);
  EXPECT_EQ(fingerprint_file(dir / "big"), (FileFingerprint{big.size(), sha256_hex(big)}));
  EXPECT_THROW(fingerprint_file(dir / "missing"), InputError);
  EXPECT_THROW(fingerprint_file(dir), InputError);
}

TEST(InputFingerprints, ListsEveryFileTheModelsAndBenchmarksRead) {
  const Study s = make_study("fp_list");
  const Manifest m = load_manifest(s.manifest);
  std::vector<std::string> got;
  for (const auto& f : list_input_files(m)) got.push_back(f.input + " " + f.file);
  const std::vector<std::string> want = {
      "models.gguf-model.path m.gguf",       "models.hf-model.path config.json",
      "models.hf-model.path tokenizer.json", "models.hf-model.path model.safetensors.index.json",
      "models.hf-model.path s1.safetensors", "models.hf-model.path s2.safetensors",
      "benchmarks.lb.data_dir qasper.jsonl", "benchmarks.r.essay essay.txt",
  };
  EXPECT_EQ(got, want);
  const json lock = lock_of(m);
  EXPECT_EQ(lock["kvaudit_prereg_schema"], 2);
  ASSERT_EQ(lock["inputs"].size(), want.size());
  EXPECT_EQ(lock["inputs"][0]["sha256"], sha256_hex("gguf bytes"));
  EXPECT_EQ(lock["inputs"][0]["bytes"], 10);
  EXPECT_EQ(lock["inputs"][0]["path"], fs::absolute(s.dir / "m.gguf").lexically_normal().string());
  // The fingerprints are not part of the manifest hash.
  EXPECT_EQ(sha256_hex(lock["canonical_manifest"].dump()), lock["manifest_sha256"]);
  EXPECT_NO_THROW(verify_prereg(lock, "prereg.json"));
  EXPECT_EQ(refusal(lock, m, AbsentInput::refuse, nullptr), "");
}

TEST(InputFingerprints, AChangedShardIsRefusedNamingTheFileAndBothFingerprints) {
  const Study s = make_study("fp_changed");
  const Manifest m = load_manifest(s.manifest);
  const json lock = lock_of(m);
  test::write_file(s.dir / "hf" / "s2.safetensors", "shard TWO");
  for (const AbsentInput absent : {AbsentInput::refuse, AbsentInput::note}) {
    const std::string what = refusal(lock, m, absent, nullptr);
    EXPECT_NE(what.find((s.dir / "hf" / "s2.safetensors").string()), std::string::npos) << what;
    EXPECT_NE(what.find("locked 9 bytes, sha256 " + sha256_hex("shard two")), std::string::npos)
        << what;
    EXPECT_NE(what.find("now 9 bytes, sha256 " + sha256_hex("shard TWO")), std::string::npos)
        << what;
    EXPECT_NE(what.find("nothing was run"), std::string::npos) << what;
  }
}

TEST(InputFingerprints, ASwappedGgufAndAnAddedShardAreRefused) {
  const Study s = make_study("fp_swapped");
  const Manifest m = load_manifest(s.manifest);
  const json lock = lock_of(m);
  test::write_file(s.dir / "m.gguf", "another model entirely");
  test::write_file(s.dir / "hf" / "model.safetensors.index.json",
                   R"({"weight_map": {"x": "s1.safetensors", "y": "s2.safetensors",
                       "w": "s3.safetensors"}})");
  test::write_file(s.dir / "hf" / "s3.safetensors", "shard three");
  const std::string what = refusal(lock, m, AbsentInput::refuse, nullptr);
  EXPECT_NE(what.find("m.gguf (models.gguf-model.path): changed"), std::string::npos) << what;
  EXPECT_NE(what.find("model.safetensors.index.json (models.hf-model.path): changed"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("s3.safetensors (models.hf-model.path): read by the study but not "
                      "fingerprinted"),
            std::string::npos)
      << what;
}

TEST(InputFingerprints, AnAbsentFileIsRefusedByRunAndNotedByReduce) {
  const Study s = make_study("fp_absent");
  const Manifest m = load_manifest(s.manifest);
  const json lock = lock_of(m);
  fs::remove_all(s.dir / "hf");
  std::string notes;
  const std::string what = refusal(lock, m, AbsentInput::refuse, &notes);
  EXPECT_NE(what.find("file config.json): fingerprinted in the lock"), std::string::npos) << what;
  EXPECT_EQ(refusal(lock, m, AbsentInput::note, &notes), "");
  EXPECT_NE(notes.find("models.hf-model.path file s1.safetensors is absent here"),
            std::string::npos)
      << notes;
}

TEST(InputFingerprints, ASchemaOneLockIsReadWithANote) {
  const Study s = make_study("fp_schema1");
  const Manifest m = load_manifest(s.manifest);
  json lock = lock_of(m);
  lock.erase("inputs");
  lock["kvaudit_prereg_schema"] = 1;
  EXPECT_NO_THROW(verify_prereg(lock, "prereg.json"));
  std::string notes;
  EXPECT_EQ(refusal(lock, m, AbsentInput::refuse, &notes), "");
  EXPECT_NE(notes.find("schema 1 records no fingerprints"), std::string::npos) << notes;
  // A schema-2 lock without its fingerprints is damaged.
  lock["kvaudit_prereg_schema"] = 2;
  EXPECT_THROW(verify_prereg(lock, "prereg.json"), InputError);
}

std::string verify_error(const json& lock) {
  try {
    verify_prereg(lock, "/s/prereg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PreregCheck, AnEditedLockIsRefusedNamingTheField) {
  const Study s = make_study("fp_tamper");
  const json lock = lock_of(load_manifest(s.manifest));
  ASSERT_EQ(verify_error(lock), "");
  auto edited = [&](const std::function<void(json&)>& edit) {
    json j = lock;
    edit(j);
    return verify_error(j);
  };
  EXPECT_EQ(edited([](json& j) {
              j["canonical_manifest"]["study"]["seed"] = 4;
            }).rfind("/s/prereg.json: canonical_manifest: hashes to ", 0),
            0u);
  EXPECT_EQ(edited([](json& j) { j["counts"] = "5"; })
                .rfind("/s/prereg.json: counts: must be an "
                       "object, found string \"5\"",
                       0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["counts"]["cells"] = "8";
            }).rfind("/s/prereg.json: counts.cells: must be a non-negative integer", 0),
            0u);
  EXPECT_EQ(edited([](json& j) { j.erase("splits"); }).rfind("/s/prereg.json: splits: missing", 0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["tool"]["git_commit"] = 5;
            }).rfind("/s/prereg.json: tool.git_commit: must be a string", 0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["contracts"] = json::object();
            }).rfind("/s/prereg.json: contracts: must be an array", 0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["inputs"][1]["sha256"] = "abc";
            }).rfind("/s/prereg.json: inputs[1].sha256: must be 64 lowercase hex digits", 0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["inputs"][0]["bytes"] = -1;
            }).rfind("/s/prereg.json: inputs[0].bytes: must be a non-negative integer", 0),
            0u);
  EXPECT_EQ(edited([](json& j) {
              j["manifest_sha256"] = std::string(64, 'g');
            }).rfind("/s/prereg.json: manifest_sha256: must be 64 lowercase hex digits", 0),
            0u);
  EXPECT_NE(edited([](json& j) {
              j["kvaudit_prereg_schema"] = 3;
            }).find("preregistration schema 3 is not supported"),
            std::string::npos);
  EXPECT_EQ(edited([](json& j) { j["study"] = "other"; }).rfind("/s/prereg.json: study: is ", 0),
            0u);
}

TEST(PreregCheck, LoadPreregVerifiesTheWholeLock) {
  const Study s = make_study("fp_load");
  const Manifest m = load_manifest(s.manifest);
  json lock = lock_of(m);
  const fs::path out = s.dir / "out";
  ASSERT_EQ(write_prereg(out, lock), PreregOutcome::written);
  EXPECT_NO_THROW(load_prereg(out));
  lock["splits"] = json::array();
  fs::remove(out / "prereg.json");
  test::write_file(out / "prereg.json", lock.dump(2));
  try {
    load_prereg(out);
    FAIL() << "an edited lock was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("prereg.json: splits: must be an object"),
              std::string::npos)
        << e.what();
  }
}

TEST(PreregCheck, AnOutputDirThatIsAFileIsRefusedNamingIt) {
  const auto dir = test::fresh_dir("fp_outfile");
  test::write_file(dir / "file", "x");
  const Study s = make_study("fp_outfile_study");
  try {
    write_prereg(dir / "file", lock_of(load_manifest(s.manifest)));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "file").string() + ": not a directory"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::manifest
