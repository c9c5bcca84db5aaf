// kvaudit reduce RESULTS_DIR: checks the study against its preregistration lock (the lock verified
// whole, the manifest hash, the fingerprints of the models and data files that are present — absent
// ones are noted and skipped —, the certification contracts, the splits and the Bonferroni
// families), reads every published shard, reports coverage of the preregistered cells, runs the
// analyses (certification, accuracy, protocol gap, best-of-3 baseline wins, backend confound) and
// writes the report (report.md, CSV and LaTeX tables, summary.h5, gnuplot figures) to
// RESULTS_DIR/report (report-2, … on reruns).
// Exit codes (docs/CLI.md): 0 report written, coverage complete; 3 report written, coverage
// incomplete (numbers marked partial); 1 bad input, nothing written; 2 internal error.
#include <iostream>

#include "base/errors.h"
#include "suite/cli/command.h"
#include "suite/cli/seed_option.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/prereg.h"
#include "suite/reduce/lock_check.h"
#include "suite/reduce/reduce_study.h"

namespace kvaudit::cli {
namespace {

void print_reduce_summary(const reduce::ReduceResult& r) {
  const auto& c = r.coverage;
  std::cout << "study      " << r.study->manifest.study.name << "\n"
            << "sha256     " << r.study->manifest_sha256 << "\n"
            << "coverage   " << (c.total.expected - c.total.missing) << " of " << c.total.expected
            << (c.reuse ? " preregistered (cell, question) results recorded (reuse cells count "
                          "once per question; "
                        : " preregistered cells recorded (")
            << c.total.ok << " scored, " << c.total.excluded << " excluded, " << c.total.failed
            << " failed, " << c.total.missing << " missing)\n";
  if (!r.complete())
    std::cout << "           PARTIAL: numbers from incomplete cell groups are marked partial; "
                 "missing cells are listed in tables/missing_cells.csv\n";
  std::cout << "bootstrap  B = " << r.bootstrap.resamples << ", seed " << r.bootstrap.seed << "\n";
  for (const auto& run : r.certification.runs) {
    const auto& block = r.study->manifest.certifications[run.block];
    std::cout << "certify    " << block.name << " / " << r.study->manifest.models[run.model].name
              << ": ";
    if (!run.computed) {
      std::cout << run.not_computed_reason << "\n";
      continue;
    }
    std::cout << "n = " << run.result.n << ", K* = " << run.result.k_star << ", selected "
              << run.result.selected_policy << ", plug-in " << run.result.plug_in_policy
              << (run.partial ? " (partial)" : "") << "\n";
  }
  for (const auto& row : r.protocol_gap.pooled.rows) {
    if (row.result.empty) continue;
    const auto& m = r.study->manifest;
    std::cout << "gap        " << manifest::kAttentionBackendNames[row.key[0]] << " "
              << m.benchmarks[static_cast<std::size_t>(row.key[1])].name << " "
              << (row.key[2] < 0 ? std::string("full")
                                 : m.methods[static_cast<std::size_t>(row.key[2])].name)
              << ": delta = " << reduce::format_fixed(row.result.estimate, 3) << " ["
              << reduce::format_fixed(row.result.ci_lower, 3) << ", "
              << reduce::format_fixed(row.result.ci_upper, 3) << "]"
              << (row.pairs.partial() ? " (partial)" : "") << "\n";
  }
  for (const auto& w : r.warnings) std::cout << "warning    " << w << "\n";
  std::cout << "report     " << r.report_dir.string() << "/report.md\n";
}

// Before anything is read or written: the lock (verified whole by load_prereg), the manifest it
// locks, and the fingerprints of the study's models and data. When the manifest cannot be found
// here, reduce::load_study says so.
void check_lock_and_inputs(const reduce::LoadOptions& load) {
  const auto dir = std::filesystem::absolute(load.results_dir).lexically_normal();
  const auto lock_file = dir / manifest::kPreregFile;
  const auto lock = manifest::load_prereg(dir);
  std::filesystem::path manifest_file;
  if (load.manifest_file)
    manifest_file = *load.manifest_file;
  else
    manifest_file = lock.at("manifest_path").get<std::string>();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(manifest_file, ec)) return;
  const auto m = manifest::load_manifest(manifest_file);
  reduce::require_same_manifest(lock, lock_file, manifest_file, manifest::manifest_sha256(m));
  reduce::require_same_inputs(lock, lock_file, m, std::cerr);
}

}  // namespace

Command reduce_command() {
  Command c;
  c.name = "reduce";
  c.summary =
      "check a study's records against its preregistration and reduce them to a report "
      "(certification, intervals, paired bootstrap, tables, figures)";
  c.usage =
      "kvaudit reduce RESULTS_DIR [--manifest FILE] [--bootstrap-resamples B] [--seed S] "
      "[--threads N] [--salvage] [--salvage-corrupt] [--no-figures]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("results-dir", po::value<std::string>()->required(),
                    "the study's output directory (holds prereg.json and shards/)")(
        "manifest", po::value<std::string>(),
        "the study's manifest (default: the manifest_path the lock records); its hash must "
        "equal the lock's")(
        "bootstrap-resamples,B", po::value<std::int64_t>(),
        "paired-bootstrap replicates (default: the manifest's statistics.bootstrap_resamples)")(
        "seed", po::value<std::string>(),
        "bootstrap seed, an integer in [0, 2^64 - 1] (default: the manifest's statistics.seed, "
        "else study.seed)")(
        "threads", po::value<int>()->default_value(0),
        "bootstrap threads (0: every hardware thread); results do not depend on it")(
        "salvage", "also use the flushed records of unpublished (.h5.tmp) shards")(
        "salvage-corrupt",
        "use the records of published shards that fail their checksum whose record digests still "
        "match, instead of refusing the study (docs/RECORDS.md §Integrity)")(
        "no-figures", "do not run gnuplot (tables and summary.h5 only)");
    p.add("results-dir", 1);
  };
  c.body = [](const po::variables_map& vm) {
    reduce::ReduceOptions options;
    options.load.results_dir = vm["results-dir"].as<std::string>();
    if (vm.count("manifest")) options.load.manifest_file = vm["manifest"].as<std::string>();
    options.load.salvage = vm.count("salvage") > 0;
    options.load.salvage_corrupt = vm.count("salvage-corrupt") > 0;
    if (vm.count("bootstrap-resamples")) {
      const auto b = vm["bootstrap-resamples"].as<std::int64_t>();
      if (b < 1 || b > 100'000'000)
        throw InputError("--bootstrap-resamples " + std::to_string(b) +
                         ": must be in [1, 100000000]");
      options.resamples = b;
    }
    if (vm.count("seed")) options.seed = parse_seed_option(vm["seed"].as<std::string>(), "--seed");
    options.threads = vm["threads"].as<int>();
    if (options.threads < 0)
      throw InputError("--threads " + std::to_string(options.threads) + ": must be >= 0");
    options.figures = vm.count("no-figures") == 0;
    options.log = &std::cerr;
    check_lock_and_inputs(options.load);
    const auto result = reduce::reduce_study(options);
    print_reduce_summary(result);
    return static_cast<int>(result.complete() ? ExitCode::ok : ExitCode::incomplete);
  };
  return c;
}

}  // namespace kvaudit::cli
