// `kvaudit verify BUNDLE [--claims FILE] [--rerun K --model NAME=PATH …]`: does a bundle's report
// follow from its records, and its records from its preregistered manifest?
//
//   1. the bundle: a directory, or a .tar extracted into a temporary directory (external_tar.h);
//   2. every file against SHA256SUMS (sha256_sums.h): a changed, missing or added file fails;
//   3. the lock against the manifest and the shards against both: the reduce stage's loader
//      (lock hash, contracts, splits, families; every shard's sidecar and manifest hash);
//   4. the reduce stage re-run from the bundled shards in a temporary directory, with the
//      bootstrap resamples and seed the bundled summary.h5 records, without figures; every table
//      compared with the bundled report (report_comparison.h), one verdict per table;
//   5. with --claims: each claim checked against the bundled tables (claims.h);
//   6. with --rerun K: K recorded cells re-executed (cell_rerun.h).
// Prints a verdict per check and per table and returns 0 only when everything matches, else 1.
// The temporary directories are removed. Works wherever the bundle is: it holds no absolute path.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>

namespace kvaudit::artifacts {

struct VerifyOptions {
  std::filesystem::path bundle;
  std::optional<std::filesystem::path> claims;
  std::int64_t rerun = 0;  // 0: no re-run
  std::uint64_t rerun_seed = 0;
  std::map<std::string, std::filesystem::path> models;  // for --rerun
  int threads = 0;                                      // bootstrap threads (0: all)
};

int verify_bundle(const VerifyOptions& options, std::ostream& out);

}  // namespace kvaudit::artifacts
