// `kvaudit bundle STUDY_DIR --out PATH [--partial]`: packs a study for artifact evaluation
// (bundle_layout.h lists what goes in). The study is loaded and checked as `kvaudit reduce` loads
// it (lock, manifest, verified shards); its latest report (report, report-2, …: the highest) is
// bundled as it is — `kvaudit verify` later recomputes it from the bundled shards.
//
// A study whose coverage is incomplete (an expected cell without a record, or a failed record:
// oom, error, abandoned) is refused unless `partial`; a partial bundle's README says so first.
// PATH ending in ".tar" makes a tar archive (GNU tar, reproducible: sorted names, owner 0, mtime
// 0); any other PATH a directory. PATH must not exist (nothing is ever overwritten).
#pragma once

#include <filesystem>
#include <ostream>

namespace kvaudit::artifacts {

struct BundleOptions {
  std::filesystem::path study;  // the study's output directory (prereg.json, shards/, report*/)
  std::filesystem::path out;    // a new directory, or a new FILE.tar
  bool partial = false;         // bundle an incomplete study (said in the README)
};

struct BundleSummary {
  std::size_t files = 0;  // files listed in SHA256SUMS
  std::size_t shards = 0;
  std::size_t records = 0;
  std::size_t cells = 0;         // expected by the manifest
  std::size_t missing = 0;       // expected cells without a record
  std::size_t failed = 0;        // records oom / error / abandoned
  std::filesystem::path report;  // the report directory bundled
};

// Throws InputError (exit 1) for a study that cannot be loaded, has no report, is incomplete
// without `partial`, or an `out` that exists; a partly written bundle is removed.
BundleSummary make_bundle(const BundleOptions& options, std::ostream& log);

}  // namespace kvaudit::artifacts
