// `kvaudit bundle` (see bundle_writer.h).
#include "suite/artifacts/bundle_writer.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "suite/artifacts/bundle_layout.h"
#include "suite/artifacts/external_tar.h"
#include "suite/artifacts/sha256_sums.h"
#include "suite/benchmarks/task_catalog.h"
#include "suite/common/atomic_file.h"
#include "suite/common/build_info.h"
#include "suite/common/sha256.h"
#include "suite/common/utc_time.h"
#include "suite/manifest/prereg.h"
#include "suite/records/provenance.h"
#include "suite/reduce/study_loader.h"

namespace kvaudit::artifacts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The highest report directory: report, report-2, report-3, …
fs::path latest_report(const fs::path& study) {
  fs::path best;
  long best_n = 0;
  for (const auto& entry : fs::directory_iterator(study)) {
    const std::string name = entry.path().filename().string();
    long n = 0;
    if (name == "report") {
      n = 1;
    } else if (name.starts_with("report-") && name.size() > 7 &&
               std::all_of(name.begin() + 7, name.end(),
                           [](char c) { return c >= '0' && c <= '9'; }) &&
               name.size() < 16) {
      n = std::stol(name.substr(7));
    }
    if (n > best_n && fs::is_directory(entry.status())) {
      best_n = n;
      best = entry.path();
    }
  }
  if (best.empty()) {
    throw InputError(study.string() + ": no report directory; run `kvaudit reduce " +
                     study.string() +
                     "` first (the bundle carries the report an evaluator checks)");
  }
  return best;
}

void copy_regular_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path target = to / fs::relative(it->path(), from);
    const fs::file_status status = it->symlink_status();
    if (fs::is_directory(status)) {
      fs::create_directories(target);
    } else if (fs::is_regular_file(status)) {
      fs::copy_file(it->path(), target);
    } else {
      throw InputError(it->path().string() + ": not a regular file (a link?); not bundled");
    }
  }
}

std::string seconds_text(double s) {
  std::ostringstream o;
  if (s < 10) {
    o << std::fixed << std::setprecision(2) << s << " s";
  } else if (s < 120) {
    o << std::fixed << std::setprecision(0) << s << " s";
  } else if (s < 7200) {
    o << std::fixed << std::setprecision(1) << s / 60 << " min";
  } else {
    o << std::fixed << std::setprecision(1) << s / 3600 << " h";
  }
  return o.str();
}

std::string readme(const reduce::LoadedStudy& s, const BundleSummary& sum,
                   const std::string& bundle_name, bool partial) {
  const manifest::Manifest& m = s.manifest;
  std::ostringstream o;
  o << "# Artifact bundle: " << m.study.name << "\n\n";
  if (partial) {
    o << "**PARTIAL STUDY.** This bundle was made with `kvaudit bundle --partial`: " << sum.missing
      << " of " << sum.cells << " preregistered cells have no record and " << sum.failed
      << " records failed (oom, error, abandoned). The report marks the numbers of the groups "
         "they belong to as partial.\n\n";
  }
  const BuildInfo& bi = build_info();
  o << "Made by kvaudit " << bi.version << " (" << bi.git_commit
    << (bi.git_dirty == "true" ? ", with uncommitted changes" : "") << ") on " << utc_now_iso8601()
    << ". Manifest SHA-256 (canonical form) `" << s.manifest_sha256 << "`.\n\n";
  o << "## What was run\n\n";
  o << "* " << sum.cells << " preregistered cells in " << s.expansion.units.size() << " units; "
    << sum.records << " records in " << sum.shards << " published shards";
  std::map<std::string, std::size_t> by_status;
  for (const auto& r : s.records.records) ++by_status[std::string(records::enum_name(r.status))];
  o << " (";
  bool first = true;
  for (const auto& [status, n] : by_status) {
    o << (first ? "" : ", ") << n << " " << status;
    first = false;
  }
  o << ")" << (sum.missing > 0 ? "; " + std::to_string(sum.missing) + " cells missing" : "")
    << ".\n";
  for (const auto& model : m.models) {
    o << "* model `" << model.name << "`: " << model.format << ", " << model.dtype << ", file "
      << fs::path(model.path).filename().string() << "\n";
  }
  for (const auto& b : m.benchmarks) {
    o << "* benchmark `" << b.name << "` (" << benchmarks::kind_name(b.kind) << ", length "
      << b.length << ", " << b.instances << " instances per task): ";
    for (std::size_t i = 0; i < b.tasks.size(); ++i) o << (i ? ", " : "") << b.tasks[i];
    o << "\n";
  }
  o << "* method configurations: ";
  for (std::size_t i = 0; i < m.methods.size(); ++i) {
    o << (i ? ", " : "") << "`" << m.methods[i].name << "` (" << m.methods[i].method << ")";
  }
  o << "\n";
  std::set<std::string> hosts, gpus, cpus;
  std::set<int> attempts;
  for (const auto& shard : s.records.published) {
    hosts.insert(shard.provenance.hostname);
    if (!shard.provenance.gpu_name.empty()) gpus.insert(shard.provenance.gpu_name);
    if (!shard.provenance.cpu_model.empty()) {
      cpus.insert(shard.provenance.cpu_model +
                  (shard.provenance.blas_core.empty()
                       ? ""
                       : " (OpenBLAS core " + shard.provenance.blas_core + ")"));
    }
    attempts.insert(shard.provenance.attempt);
  }
  o << "* recorded on " << hosts.size() << " host(s), " << attempts.size() << " attempt(s), "
    << (gpus.empty() ? std::string("no GPU (CPU backend)") : "GPU(s): ");
  first = true;
  for (const auto& g : gpus) {
    o << (first ? "" : ", ") << g;
    first = false;
  }
  if (!cpus.empty()) {
    o << "; CPU(s): ";
    first = true;
    for (const auto& c : cpus) {
      o << (first ? "" : ", ") << c;
      first = false;
    }
  }
  o << "; each shard's provenance is in `" << kProvenance << "`, the model and data fingerprints "
    << "in `" << kFingerprints << "`.\n\n";

  o << "## How to verify\n\n"
    << "```sh\n"
    << "kvaudit verify " << bundle_name << "\n"
    << "kvaudit verify " << bundle_name << " --claims claims.csv\n";
  for (const auto& model : m.models) {
    o << "kvaudit verify " << bundle_name << " --rerun 20 --model " << model.name << "=PATH\n";
  }
  o << "```\n\n"
    << "`verify` checks every file against `" << kSums << "` (also `sha256sum -c " << kSums
    << "`), the lock against the manifest, re-runs the reduce stage from the bundled shards in a "
       "temporary directory and compares every table (CSV byte for byte, summary.h5 value by "
       "value) with the bundled report; it exits 0 only when everything matches. `--claims` "
       "checks numbers as printed in a paper (CSV: `table,row,column,value`) against the report. "
       "`--rerun K` re-executes K randomly chosen cells (seeded, printed) on your hardware with "
       "the model files you name (they must match the fingerprints) and compares outputs, scores "
       "and kept-set digests with the records. Walk-through: docs/ARTIFACTS.md of kvaudit.\n\n";

  // Recorded compute, from the records' unit spans (cells of a unit share its span).
  std::map<std::pair<std::uint64_t, std::int64_t>, std::pair<double, std::size_t>> units;
  for (const auto& r : s.records.records) {
    if (r.t_end_ns <= r.t_start_ns) continue;
    auto& u = units[{r.unit_id, r.t_start_ns}];
    u.first = static_cast<double>(r.t_end_ns - r.t_start_ns) * 1e-9;
    ++u.second;
  }
  double total = 0;
  std::size_t cells = 0;
  for (const auto& [key, u] : units) {
    total += u.first;
    cells += u.second;
  }
  o << "## Re-running cells\n\n";
  if (units.empty()) {
    o << "No record carries a measured time.\n";
  } else {
    const double per_unit = total / static_cast<double>(units.size());
    const double per_cell = total / static_cast<double>(cells);
    o << "Recorded compute: " << seconds_text(total) << " of rank time for " << cells
      << " cells in " << units.size() << " unit runs (mean " << seconds_text(per_unit)
      << " per unit, " << std::setprecision(3) << per_cell
      << " s per cell when a unit runs all its cells). `verify --rerun K` runs each chosen cell "
         "with only the other chosen cells of its unit, re-doing the unit's prefill and decoding, "
         "so on the recorded hardware it takes at most about K × "
      << seconds_text(per_unit) << ":\n\n"
      << "| cells re-run | estimate |\n|---|---|\n";
    for (const std::size_t k : {std::size_t{20}, std::size_t{100}}) {
      o << "| " << k << " (`--rerun " << k << "`) | ≤ "
        << seconds_text(static_cast<double>(k) * per_unit) << " |\n";
    }
    o << "| all " << sum.cells << " (`kvaudit run` of the manifest) | ≈ "
      << seconds_text(per_cell * static_cast<double>(sum.cells)) << " of rank time |\n";
  }
  return o.str();
}

json provenance_json(const reduce::LoadedStudy& s) {
  json out = json::array();
  for (const auto& shard : s.records.published) {
    json one = {{"shard", (fs::path(kShards) / shard.file.filename()).generic_string()},
                {"records", shard.n_records}};
    for (const auto& [key, value] : records::provenance_items(shard.provenance)) one[key] = value;
    out.push_back(std::move(one));
  }
  return out;
}

class StagingGuard {
 public:
  explicit StagingGuard(fs::path dir) : dir_(std::move(dir)) {}
  ~StagingGuard() {
    if (!dir_.empty()) {
      std::error_code ignored;
      fs::remove_all(dir_, ignored);
    }
  }
  void keep() { dir_.clear(); }

 private:
  fs::path dir_;
};

}  // namespace

BundleSummary make_bundle(const BundleOptions& options, std::ostream& log) {
  if (fs::exists(fs::symlink_status(options.out))) {
    throw InputError(options.out.string() + ": exists; a bundle is never written over anything");
  }
  reduce::LoadOptions load;
  load.results_dir = options.study;
  const reduce::LoadedStudy s = reduce::load_study(load);

  BundleSummary sum;
  sum.cells = s.expansion.cells.size();
  sum.records = s.records.records.size();
  sum.shards = s.records.published.size();
  std::vector<std::uint64_t> recorded;
  for (const auto& r : s.records.records) {
    recorded.push_back(r.cell_id);
    if (r.status == records::CellStatus::oom || r.status == records::CellStatus::error ||
        r.status == records::CellStatus::abandoned) {
      ++sum.failed;
    }
  }
  std::sort(recorded.begin(), recorded.end());
  for (const auto& c : s.expansion.cells) {
    if (!std::binary_search(recorded.begin(), recorded.end(), c.id)) ++sum.missing;
  }
  if ((sum.missing > 0 || sum.failed > 0) && !options.partial) {
    throw InputError(options.study.string() + ": coverage is incomplete (" +
                     std::to_string(sum.missing) + " of " + std::to_string(sum.cells) +
                     " cells have no record, " + std::to_string(sum.failed) +
                     " records failed); finish the study (kvaudit run [--retry-failed]) or bundle "
                     "it with --partial, which the bundle's README states");
  }
  sum.report = latest_report(s.results_dir);
  if (!s.records.temporary.empty()) {
    log << "kvaudit bundle: " << s.records.temporary.size()
        << " unpublished .tmp shard(s) are not bundled (only published shards are)\n";
  }

  const bool tar = options.out.extension() == ".tar";
  const fs::path parent = fs::absolute(options.out).parent_path();
  if (!fs::is_directory(parent)) {
    throw InputError(options.out.string() + ": its directory " + parent.string() +
                     " does not exist");
  }
  const fs::path root = tar ? parent / (options.out.filename().string() + ".staging") : options.out;
  if (fs::exists(fs::symlink_status(root))) {
    throw InputError(root.string() + ": exists (a bundle left half-made?); remove it first");
  }
  fs::create_directory(root);
  StagingGuard guard(root);

  fs::copy_file(s.lock_file, root / kLock);
  fs::copy_file(s.manifest_file, root / kManifest);
  fs::create_directory(root / kShards);
  for (const auto& shard : s.records.published) {
    fs::copy_file(shard.file, root / kShards / shard.file.filename());
    const fs::path sidecar = shard.file.string() + ".sha256";
    if (fs::exists(sidecar)) fs::copy_file(sidecar, root / kShards / sidecar.filename());
  }
  copy_regular_tree(sum.report, root / kReport);
  write_new_file(root / kFingerprints,
                 (s.lock.contains("inputs") ? s.lock["inputs"] : json::array()).dump(2) + "\n");
  write_new_file(root / kProvenance, provenance_json(s).dump(2) + "\n");
  write_new_file(root / kReadme, readme(s, sum, options.out.filename().string(), options.partial));
  write_sums(root);
  {
    std::ifstream in(root / kSums);
    std::string line;
    while (std::getline(in, line)) ++sum.files;
  }
  if (tar) {
    create_tar(root, options.out);
  } else {
    guard.keep();
  }
  log << "kvaudit bundle: " << options.out.string() << ": " << sum.files << " files (" << sum.shards
      << " shards, " << sum.records << " records, report " << sum.report.filename().string() << ")"
      << (options.partial && (sum.missing > 0 || sum.failed > 0) ? " — PARTIAL" : "") << "\n";
  return sum;
}

}  // namespace kvaudit::artifacts
