// Shard fuzz test (label records): damaged shards never crash, hang or silently change what is
// read. A shard of 300 formula records (strings in HDF5's global heap, 100 KB outputs, two chunks)
// is damaged per seed — 1 to 8 bit flips over the whole file, 1 to 8 over its first 16 KiB, or a
// truncation — and read back through read_study as
//   * a published shard (its sidecar from before the damage): refused, naming the file;
//   * a published shard with --salvage-corrupt: a subset of the original records, exactly;
//   * an unpublished .tmp (salvage, no checksum; read in a child process first): a subset of the
//     original records, exactly, or reported unreadable.
// Each case runs in a child process of its own under a 30 s alarm, so a crash or a hang inside
// HDF5 is counted instead of ending the test. Every case must end "intact" (the original records),
// "subset" (only original records, the rest reported), or "refused" (an InputError naming the
// file); crashes, hangs, unnamed refusals and changed records fail the test.
//
// KVAUDIT_SHARD_FUZZ_SEEDS overrides the number of seeds (default 300).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "base/errors.h"
#include "suite/records/record_digest.h"
#include "suite/records/shard_checksum.h"
#include "suite/records/shard_reader.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::file_bytes;
using testing::formula_record;
using testing::TempDir;
using testing::write_bytes;

constexpr std::uint64_t kRecords = 300;
constexpr unsigned kCaseSeconds = 30;

enum class Damage { flips_whole_file, flips_first_16k, truncation };
enum class ReadAs { published, published_salvage_corrupt, temporary_salvage };

enum CaseResult : int {
  intact = 0,
  subset = 1,
  refused = 2,
  refused_unnamed = 3,
  changed = 4,
  other_error = 5,
  isolated_crash = 6,  // HDF5 crashed in the isolated reader's child: reported, nothing used
  isolated_hang = 7,   // HDF5 hung in the isolated reader's child: killed, reported
  crashed = 100,
  hung = 101,
};

const char* result_name(int r) {
  switch (r) {
    case intact:
      return "intact";
    case subset:
      return "subset";
    case refused:
      return "refused (file named)";
    case refused_unnamed:
      return "REFUSED WITHOUT NAMING THE FILE";
    case changed:
      return "CHANGED RECORDS";
    case other_error:
      return "OTHER ERROR";
    case isolated_crash:
      return "caught HDF5 crash (isolated reader)";
    case isolated_hang:
      return "caught HDF5 hang (isolated reader)";
    case crashed:
      return "CRASHED";
    case hung:
      return "HUNG";
  }
  return "?";
}

std::string damage(std::string bytes, Damage kind, std::mt19937_64& rng) {
  if (kind == Damage::truncation) {
    bytes.resize(std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(rng));
    return bytes;
  }
  const std::size_t span =
      kind == Damage::flips_first_16k ? std::min<std::size_t>(16384, bytes.size()) : bytes.size();
  const int flips = std::uniform_int_distribution<int>(1, 8)(rng);
  for (int i = 0; i < flips; ++i) {
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, span - 1)(rng);
    const int bit = std::uniform_int_distribution<int>(0, 7)(rng);
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
  }
  return bytes;
}

// What the child process does: set up the case, read it, judge the outcome.
int run_case(const std::filesystem::path& dir, const std::string& shard_name,
             const std::string& damaged, const std::string& sidecar, ReadAs read_as,
             const std::map<std::uint64_t, std::uint64_t>& original_digests) {
  std::filesystem::create_directories(dir);
  const bool temporary = read_as == ReadAs::temporary_salvage;
  const auto file = dir / (temporary ? shard_name + ".tmp" : shard_name);
  write_bytes(file, damaged);
  if (!temporary) write_bytes(checksum_path(file), sidecar);
  StudyReadOptions options;
  options.salvage = temporary;
  options.salvage_corrupt = read_as == ReadAs::published_salvage_corrupt;
  options.isolation_timeout = std::chrono::seconds(20);
  try {
    const StudyRecords study = read_study(dir, options);
    bool caught_crash = false, caught_hang = false;
    for (const auto& t : study.temporary) {
      caught_crash |= t.message.find("crashed the HDF5 library") != std::string::npos;
      caught_hang |= t.message.find("did not finish within") != std::string::npos;
    }
    for (const auto& r : study.records) {
      const auto it = original_digests.find(r.cell_id);
      if (it == original_digests.end() || it->second != record_digest(r)) return changed;
    }
    if (study.records.size() == original_digests.size()) return intact;
    // Fewer records: allowed only where salvage reports what it left out.
    if (read_as == ReadAs::published) return changed;
    if (caught_crash) return isolated_crash;
    if (caught_hang) return isolated_hang;
    return subset;
  } catch (const InputError& e) {
    const std::string message = e.what();
    if (message.find(file.string()) == std::string::npos) return refused_unnamed;
    if (message.find("crashed the HDF5 library") != std::string::npos) return isolated_crash;
    if (message.find("did not finish within") != std::string::npos) return isolated_hang;
    return refused;
  } catch (...) {
    return other_error;
  }
}

int run_case_in_child(const std::filesystem::path& dir, const std::string& shard_name,
                      const std::string& damaged, const std::string& sidecar, ReadAs read_as,
                      const std::map<std::uint64_t, std::uint64_t>& original_digests) {
  const pid_t child = ::fork();
  if (child < 0) return other_error;
  if (child == 0) {
    ::alarm(kCaseSeconds);
    const int result = run_case(dir, shard_name, damaged, sidecar, read_as, original_digests);
    ::_exit(result);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGALRM ? hung : crashed;
  return WEXITSTATUS(status);
}

TEST(ShardFuzz, DamagedShardsAreReadExactlyOrRefusedNeverCrashHangOrChange) {
  const char* seeds_env = std::getenv("KVAUDIT_SHARD_FUZZ_SEEDS");
  const int seeds = seeds_env != nullptr ? std::atoi(seeds_env) : 300;
  TempDir dir;
  const auto original = testing::publish_formula_shard(dir / "original", 0, 0, 0, kRecords);
  const std::string bytes = file_bytes(original);
  const std::string sidecar = file_bytes(checksum_path(original));
  std::map<std::uint64_t, std::uint64_t> digests;
  for (std::uint64_t g = 0; g < kRecords; ++g) {
    const CellRecord r = formula_record(g, 0, 1);
    digests[r.cell_id] = record_digest(r);
  }
  std::cout << "shard: " << bytes.size() << " bytes, " << kRecords << " records; " << seeds
            << " seeds\n";

  const std::array<std::pair<Damage, ReadAs>, 7> kinds{{
      {Damage::flips_whole_file, ReadAs::published},
      {Damage::flips_first_16k, ReadAs::published},
      {Damage::truncation, ReadAs::published},
      {Damage::flips_whole_file, ReadAs::published_salvage_corrupt},
      {Damage::flips_first_16k, ReadAs::published_salvage_corrupt},
      {Damage::flips_whole_file, ReadAs::temporary_salvage},
      {Damage::flips_first_16k, ReadAs::temporary_salvage},
  }};
  const char* kind_names[] = {"flips/whole, published",     "flips/16K, published",
                              "truncation, published",      "flips/whole, salvage-corrupt",
                              "flips/16K, salvage-corrupt", "flips/whole, .tmp salvage",
                              "flips/16K, .tmp salvage"};
  std::map<std::pair<std::size_t, int>, int> tally;
  const auto started = std::chrono::steady_clock::now();
  int case_index = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 1000003u + k);
      const std::string damaged = damage(bytes, kinds[k].first, rng);
      const auto case_dir = dir / ("case-" + std::to_string(case_index++));
      const int result = run_case_in_child(case_dir, original.filename().string(), damaged, sidecar,
                                           kinds[k].second, digests);
      ++tally[{k, result}];
      const bool ok = result == intact || result == subset || result == refused ||
                      result == isolated_crash || result == isolated_hang;
      EXPECT_TRUE(ok) << "seed " << seed << ", " << kind_names[k] << ": " << result_name(result)
                      << " (case directory " << case_dir << ")";
      if (ok) std::filesystem::remove_all(case_dir);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    std::cout << kind_names[k] << ":";
    for (const auto& [key, n] : tally) {
      if (key.first == k) std::cout << " " << result_name(key.second) << " " << n;
    }
    std::cout << "\n";
  }
  std::cout << case_index << " cases in " << seconds << " s\n";
}

}  // namespace
}  // namespace kvaudit::records
