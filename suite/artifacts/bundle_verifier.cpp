// `kvaudit verify` (see bundle_verifier.h).
#include "suite/artifacts/bundle_verifier.h"

#include <hdf5.h>
#include <stdlib.h>

#include <fstream>
#include <iomanip>
#include <sstream>

#include "base/errors.h"
#include "suite/artifacts/bundle_layout.h"
#include "suite/artifacts/cell_rerun.h"
#include "suite/artifacts/claims.h"
#include "suite/artifacts/external_tar.h"
#include "suite/artifacts/report_comparison.h"
#include "suite/artifacts/sha256_sums.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"
#include "suite/reduce/reduce_study.h"

namespace kvaudit::artifacts {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kvaudit-verify-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw InternalError("mkdtemp " + pattern + " failed");
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The bootstrap resamples and seed the bundled report was made with (summary.h5 root attributes),
// when present.
void bundled_bootstrap(const fs::path& summary, std::optional<std::int64_t>& resamples,
                       std::optional<std::uint64_t>& seed) {
  if (!fs::exists(summary)) return;
  try {
    const std::string file = summary.string();
    h5::quiet_errors();
    const h5::File f = h5::adopt<h5::Kind::file>(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                                 h5::Blame::input, file, "H5Fopen");
    if (H5Aexists(f.get(), "bootstrap_resamples") > 0) {
      resamples = std::stoll(h5::read_string_attribute(f.get(), "bootstrap_resamples", file));
    }
    if (H5Aexists(f.get(), "bootstrap_seed") > 0) {
      seed = std::stoull(h5::read_string_attribute(f.get(), "bootstrap_seed", file));
    }
  } catch (const std::exception&) {
    // The comparison will report the unreadable summary.h5.
  }
}

}  // namespace

int verify_bundle(const VerifyOptions& options, std::ostream& out) {
  TempDir work;
  fs::path root = fs::absolute(options.bundle);
  if (fs::is_regular_file(root)) {
    const fs::path into = work.path() / "bundle";
    fs::create_directory(into);
    extract_tar(root, into);
    root = into;
    out << "bundle   " << options.bundle.string() << " (tar, extracted to a temporary directory)\n";
  } else if (fs::is_directory(root)) {
    out << "bundle   " << options.bundle.string() << "\n";
  } else {
    throw InputError(options.bundle.string() + ": no such bundle (a directory or a .tar)");
  }
  bool pass = true;

  // 2. Checksums.
  const SumsCheck sums = check_sums(root);
  if (sums.ok()) {
    out << "checksums  ok: " << sums.checked << " files match " << kSums << "\n";
  } else {
    pass = false;
    out << "checksums  FAIL\n";
    for (const auto& m : sums.mismatched) out << "  changed: " << m << "\n";
    for (const auto& m : sums.missing) out << "  missing: " << m << "\n";
    for (const auto& m : sums.unlisted) out << "  not listed in " << kSums << ": " << m << "\n";
    for (const auto& m : sums.not_regular) out << "  not a regular file: " << m << "\n";
  }

  // 3–4. The lock, the shards and the recomputed report.
  const fs::path results = work.path() / "results";
  fs::create_directory(results);
  fs::create_directory_symlink(root / kShards, results / kShards);
  fs::create_symlink(root / kLock, results / kLock);
  reduce::ReduceOptions reduce_options;
  reduce_options.load.results_dir = results;
  reduce_options.load.manifest_file = root / kManifest;
  reduce_options.threads = options.threads;
  reduce_options.figures = false;
  bundled_bootstrap(root / kReport / "summary.h5", reduce_options.resamples, reduce_options.seed);
  std::optional<reduce::ReduceResult> reduced;
  try {
    reduced.emplace(reduce::reduce_study(reduce_options));
    out << "lock       ok: the manifest hashes to the lock's " << reduced->study->manifest_sha256
        << "; contracts, splits and families as locked; "
        << reduced->study->records.published.size()
        << " shards verified against their sidecars and the manifest\n";
  } catch (const InputError& e) {
    pass = false;
    // Name the bundle's files, not the temporary directory the loader read them through.
    std::string message = e.what();
    for (const fs::path& prefix : {results, root}) {
      const std::string from = prefix.string() + "/";
      for (std::size_t at = message.find(from); at != std::string::npos;
           at = message.find(from, at)) {
        message.replace(at, from.size(), options.bundle.string() + ":");
      }
    }
    out << "lock/shards FAIL: " << message << "\n"
        << "report     not recomputed (the bundle's shards or lock do not load)\n";
  }
  if (reduced) {
    const std::vector<TableVerdict> verdicts = compare_reports(root / kReport, reduced->report_dir);
    std::size_t matching = 0;
    for (const auto& v : verdicts) matching += v.ok() ? 1 : 0;
    out << "report     " << (matching == verdicts.size() ? "ok" : "FAIL") << ": " << matching
        << " of " << verdicts.size()
        << " tables match the recomputed report (B = " << reduced->bootstrap.resamples << ", seed "
        << reduced->bootstrap.seed << ")\n";
    for (const auto& v : verdicts) {
      out << "  " << std::left << std::setw(34) << v.table << std::right;
      if (v.ok()) {
        out << "match\n";
        continue;
      }
      pass = false;
      out << "DIFFERS\n";
      if (v.csv != "match") out << "    tables/" << v.table << ".csv: " << v.csv << "\n";
      if (!v.summary_h5.empty() && v.summary_h5 != "match") {
        out << "    summary.h5 /tables/" << v.table << ": " << v.summary_h5 << "\n";
      }
    }
  }

  // 5. Claims.
  if (options.claims) {
    std::ifstream in(*options.claims, std::ios::binary);
    if (!in) throw InputError(options.claims->string() + ": cannot be read (--claims)");
    std::ostringstream text;
    text << in.rdbuf();
    const std::vector<ClaimResult> results_of_claims = check_claims(
        parse_claims(text.str(), options.claims->string()), (root / kReport / "tables").string());
    std::size_t contained = 0;
    for (const auto& r : results_of_claims) contained += r.contained ? 1 : 0;
    out << "claims     " << contained << " of " << results_of_claims.size()
        << " claims are contained in the report\n";
    for (const auto& r : results_of_claims) {
      if (r.contained) continue;
      pass = false;
      out << "  NOT CONTAINED (" << options.claims->filename().string() << " line " << r.claim.line
          << "): " << r.claim.table << " [" << r.claim.row << "] " << r.claim.column << " = "
          << r.claim.value << ": " << r.detail << "\n";
    }
  }

  // 6. Re-run.
  if (options.rerun > 0) {
    if (!reduced) {
      pass = false;
      out << "re-run     not done (the bundle does not load)\n";
    } else {
      RerunOptions rerun;
      rerun.cells = options.rerun;
      rerun.seed = options.rerun_seed;
      rerun.models = options.models;
      const RerunSummary s = rerun_cells(*reduced->study, rerun, out);
      pass = pass && s.ok();
    }
  }
  out << "verify: " << (pass ? "PASS" : "FAIL") << "\n";
  return pass ? 0 : 1;
}

}  // namespace kvaudit::artifacts
