// Shared helpers of the records unit tests: a private temporary directory per test, field-by-field
// record comparison (NaN-aware) and writer options with test provenance.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/cell_record.h"
#include "suite/records/shard_checksum.h"
#include "suite/records/shard_name.h"
#include "suite/records/shard_writer.h"
#include "tests/records/record_formula.h"

namespace kvaudit::records::testing {

// A fresh directory under KVAUDIT_RECORDS_TEST_TMP (mkdtemp), removed at the end unless the test
// failed (then kept for inspection) or KVAUDIT_KEEP_TEST_DIRS is set.
class TempDir {
 public:
  TempDir() {
    std::filesystem::create_directories(KVAUDIT_RECORDS_TEST_TMP);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                                       : std::string("records");
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    std::string pattern = std::string(KVAUDIT_RECORDS_TEST_TMP) + "/" + name + ".XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (::testing::Test::HasFailure() || std::getenv("KVAUDIT_KEEP_TEST_DIRS") != nullptr) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline const std::string kTestManifest = "{\"study\":\"unit\"}\n";

inline ShardWriterOptions test_writer_options(const std::filesystem::path& dir, int rank,
                                              std::uint32_t seq, std::size_t flush_every,
                                              const std::string& manifest = kTestManifest) {
  ShardWriterOptions options;
  options.directory = dir;
  fill_process_provenance(options.provenance);
  options.provenance.manifest_sha256 = sha256_hex(manifest);
  options.provenance.manifest_path = "unit.toml";
  options.provenance.study_name = "unit";
  options.provenance.rank = rank;
  options.launch_pid = 4242;
  options.launch_id = "0a1b2c3d";
  options.seq = seq;
  options.flush_every = flush_every;
  return options;
}

// Runs `body` and returns the InputError's message; fails the test if nothing is thrown.
template <typename Body>
std::string input_error_of(Body body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError was thrown";
  return {};
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Compares every field; the failure message names the field.
inline void expect_same_record(const CellRecord& got, const CellRecord& want) {
#define KV_EXPECT_FIELD(f) EXPECT_EQ(got.f, want.f) << "field " #f " of cell " << want.cell_id
#define KV_EXPECT_DOUBLE(f) \
  EXPECT_TRUE(same_double(got.f, want.f)) << "field " #f ": " << got.f << " vs " << want.f
  KV_EXPECT_FIELD(cell_id);
  KV_EXPECT_FIELD(unit_id);
  KV_EXPECT_FIELD(attempt);
  KV_EXPECT_FIELD(rank);
  KV_EXPECT_FIELD(status);
  KV_EXPECT_FIELD(model);
  KV_EXPECT_FIELD(benchmark);
  KV_EXPECT_FIELD(task);
  KV_EXPECT_FIELD(method);
  KV_EXPECT_FIELD(method_id);
  KV_EXPECT_FIELD(params_digest);
  KV_EXPECT_FIELD(attention_backend);
  KV_EXPECT_FIELD(protocol);
  KV_EXPECT_FIELD(split);
  KV_EXPECT_FIELD(budget_kind);
  KV_EXPECT_DOUBLE(compression);
  KV_EXPECT_DOUBLE(retention);
  KV_EXPECT_DOUBLE(threshold);
  KV_EXPECT_FIELD(instance);
  KV_EXPECT_FIELD(nominal_length);
  KV_EXPECT_FIELD(n_prompt_tokens);
  KV_EXPECT_FIELD(n_context_tokens);
  KV_EXPECT_FIELD(n_question_tokens);
  KV_EXPECT_FIELD(n_generated_tokens);
  KV_EXPECT_FIELD(kept_tokens);
  KV_EXPECT_FIELD(kept_bytes);
  KV_EXPECT_FIELD(full_bytes);
  KV_EXPECT_DOUBLE(realised_retention);
  KV_EXPECT_DOUBLE(score);
  KV_EXPECT_FIELD(t_start_ns);
  KV_EXPECT_FIELD(t_end_ns);
  KV_EXPECT_DOUBLE(prefill_ms);
  KV_EXPECT_DOUBLE(decode_ms);
  KV_EXPECT_FIELD(error);
  KV_EXPECT_FIELD(output);
#undef KV_EXPECT_FIELD
#undef KV_EXPECT_DOUBLE
}

// The schema-5 cost members (expect_same_record leaves them out: older shards lack them).
inline void expect_same_costs(const CellRecord& got, const CellRecord& want) {
  const auto same_double = [](double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || a == b;
  };
  EXPECT_TRUE(same_double(got.cell_prefill_ms, want.cell_prefill_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_capture_ms, want.cell_capture_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_extra_pass_ms, want.cell_extra_pass_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_select_ms, want.cell_select_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_evict_ms, want.cell_evict_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_feed_ms, want.cell_feed_ms)) << got.cell_id;
  EXPECT_TRUE(same_double(got.cell_decode_ms, want.cell_decode_ms)) << got.cell_id;
  EXPECT_EQ(got.peak_kv_bytes, want.peak_kv_bytes);
  EXPECT_EQ(got.shared_costs, want.shared_costs);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.threads, want.threads);
}

// The schema-6 members (reuse and decode-time compression; older shards lack them).
inline void expect_same_schema6_members(const CellRecord& got, const CellRecord& want) {
  EXPECT_EQ(got.question, want.question) << got.cell_id;
  EXPECT_EQ(got.n_questions, want.n_questions) << got.cell_id;
  EXPECT_EQ(got.final_kv_bytes, want.final_kv_bytes) << got.cell_id;
  EXPECT_EQ(got.decode_compressions, want.decode_compressions) << got.cell_id;
}

#ifdef KVAUDIT_RECORDS_GOLDEN
// Copies the published golden shard tests/golden/records/<version_dir>/<name> and its sidecar
// into <dir>/shards and returns that directory, ready for read_study.
inline std::filesystem::path copy_golden_shard(const std::filesystem::path& dir,
                                               const std::string& version_dir,
                                               const std::string& name) {
  const std::filesystem::path fixture =
      std::filesystem::path(KVAUDIT_RECORDS_GOLDEN) / version_dir / name;
  const std::filesystem::path shards = dir / "shards";
  std::filesystem::create_directories(shards);
  for (const char* suffix : {"", ".sha256"}) {
    std::filesystem::copy_file(fixture.string() + suffix, (shards / name).string() + suffix);
  }
  return shards;
}
#endif

inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// After a test edits a published shard in place: a new sidecar for its current bytes, as if the
// writer had produced it (so the reader gets past the checksum to the defect under test).
inline void reseal(const std::filesystem::path& shard) {
  std::filesystem::remove(checksum_path(shard));
  write_shard_checksum(shard, shard);
}

// Publishes a shard of formula records for global indices [first, last).
inline std::filesystem::path publish_formula_shard(const std::filesystem::path& dir, int rank,
                                                   std::uint32_t seq, std::uint64_t first,
                                                   std::uint64_t last,
                                                   const std::string& manifest = kTestManifest) {
  ShardWriter writer(test_writer_options(dir, rank, seq, 16, manifest));
  for (std::uint64_t g = first; g < last; ++g) writer.append(formula_record(g, rank, 1));
  return writer.close_and_publish();
}

// What a writer killed mid-run leaves: a child process appends formula records for [first, last)
// with `flush_every` and then _exit()s without flushing the tail, closing or publishing. Returns
// the temporary shard's path.
inline std::filesystem::path leave_crashed_temp_shard(const std::filesystem::path& dir, int rank,
                                                      std::uint32_t seq, std::uint64_t first,
                                                      std::uint64_t last, std::size_t flush_every,
                                                      const std::string& manifest = kTestManifest) {
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    try {
      ShardWriter writer(test_writer_options(dir, rank, seq, flush_every, manifest));
      for (std::uint64_t g = first; g < last; ++g) writer.append(formula_record(g, rank, 1));
      ::_exit(0);  // no destructor, no H5Fclose: like SIGKILL after the last automatic flush
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the crashing writer child failed");
  }
  return dir / (shard_file_name(shard_name_parts_from_environment(1, 4242, "0a1b2c3d", rank, seq)) +
                ".tmp");
}

}  // namespace kvaudit::records::testing
