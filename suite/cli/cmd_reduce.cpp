// kvaudit reduce RESULTS_DIR: checks the study against its preregistration lock (the manifest hash,
// the certification contracts, the splits and the Bonferroni families), reads every published
// shard, reports coverage of the preregistered cells, runs the analyses (certification, accuracy,
// protocol gap, best-of-3 baseline wins, backend confound) and writes the report (report.md, CSV
// and LaTeX tables, summary.h5, gnuplot figures) to RESULTS_DIR/report (report-2, … on reruns).
// Exit codes (docs/CLI.md): 0 report written, coverage complete; 3 report written, coverage
// incomplete (numbers marked partial); 1 bad input, nothing written; 2 internal error.
#include <iostream>

#include "suite/cli/command.h"
#include "base/errors.h"
#include "suite/reduce/reduce_study.h"

namespace kvaudit::cli {
namespace {

void print_summary(const reduce::ReduceResult& r) {
  const auto& c = r.coverage;
  std::cout << "study      " << r.study->manifest.study.name << "\n"
            << "sha256     " << r.study->manifest_sha256 << "\n"
            << "coverage   " << (c.total.expected - c.total.missing) << " of " << c.total.expected
            << " preregistered cells recorded (" << c.total.ok << " scored, " << c.total.excluded
            << " excluded, " << c.total.failed << " failed, " << c.total.missing << " missing)\n";
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

}  // namespace

Command reduce_command() {
  Command c;
  c.name = "reduce";
  c.summary =
      "check a study's records against its preregistration and reduce them to a report "
      "(certification, intervals, paired bootstrap, tables, figures)";
  c.usage =
      "kvaudit reduce RESULTS_DIR [--manifest FILE] [--bootstrap-resamples B] [--seed S] "
      "[--threads N] [--salvage] [--no-figures]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("results-dir", po::value<std::string>()->required(),
                    "the study's output directory (holds prereg.json and shards/)")(
        "manifest", po::value<std::string>(),
        "the study's manifest (default: the manifest_path the lock records); its hash must "
        "equal the lock's")(
        "bootstrap-resamples,B", po::value<std::int64_t>(),
        "paired-bootstrap replicates (default: the manifest's statistics.bootstrap_resamples)")(
        "seed", po::value<std::uint64_t>(),
        "bootstrap seed (default: the manifest's statistics.seed, else study.seed)")(
        "threads", po::value<int>()->default_value(0),
        "bootstrap threads (0: every hardware thread); results do not depend on it")(
        "salvage", "also use the flushed records of unpublished (.h5.tmp) shards")(
        "no-figures", "do not run gnuplot (tables and summary.h5 only)");
    p.add("results-dir", 1);
  };
  c.body = [](const po::variables_map& vm) {
    reduce::ReduceOptions options;
    options.load.results_dir = vm["results-dir"].as<std::string>();
    if (vm.count("manifest")) options.load.manifest_file = vm["manifest"].as<std::string>();
    options.load.salvage = vm.count("salvage") > 0;
    if (vm.count("bootstrap-resamples")) {
      const auto b = vm["bootstrap-resamples"].as<std::int64_t>();
      if (b < 1 || b > 100'000'000)
        throw InputError("--bootstrap-resamples " + std::to_string(b) +
                         ": must be in [1, 100000000]");
      options.resamples = b;
    }
    if (vm.count("seed")) options.seed = vm["seed"].as<std::uint64_t>();
    options.threads = vm["threads"].as<int>();
    if (options.threads < 0)
      throw InputError("--threads " + std::to_string(options.threads) + ": must be >= 0");
    options.figures = vm.count("no-figures") == 0;
    options.log = &std::cerr;
    const auto result = reduce::reduce_study(options);
    print_summary(result);
    return static_cast<int>(result.complete() ? ExitCode::ok : ExitCode::incomplete);
  };
  return c;
}

}  // namespace kvaudit::cli
