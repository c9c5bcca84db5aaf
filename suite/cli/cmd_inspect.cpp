// kvaudit inspect PATH: shows what kvaudit sees in a manifest (its canonical form and SHA-256),
// a study directory (preregistration and shards) or one HDF5 shard (provenance and records);
// `--cell ID --selections` re-derives one cell of a study (inspect_selections.h); `--diff A B`
// compares two studies below the score (inspect_diff.h).
#include <iostream>
#include <vector>

#include "base/errors.h"
#include "suite/cli/command.h"
#include "suite/cli/inspect_diff.h"
#include "suite/cli/inspect_selections.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/prereg.h"
#include "suite/records/study_summary.h"

namespace kvaudit::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Command inspect_command() {
  Command c;
  c.name = "inspect";
  c.summary = "show a manifest's canonical form and hash, a study directory, or an HDF5 shard";
  c.usage =
      "kvaudit inspect PATH   (PATH: MANIFEST.toml | RESULTS_DIR | SHARD.h5[.tmp])\n"
      "       kvaudit inspect RESULTS_DIR --cell ID --selections [--out FILE] [--manifest FILE]\n"
      "       kvaudit inspect --diff RESULTS_DIR_A RESULTS_DIR_B";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("path", po::value<std::vector<std::string>>()->required(),
                    "what to inspect (two study directories with --diff)")(
        "cell", po::value<std::string>(),
        "with --selections: the cell (16 hex digits, as the report's tables print it)")(
        "selections", po::bool_switch(),
        "re-derive the cell on the CPU: its prompt ids and kept positions per layer and KV head "
        "(JSON lines), both digests checked against its record")(
        "out", po::value<std::string>(), "with --selections: write the JSON lines here")(
        "manifest", po::value<std::string>(),
        "with --selections: the study's manifest (default: the lock's manifest_path)")(
        "diff", po::bool_switch(), "compare two studies' prompts, kept sets and outputs");
    p.add("path", -1);
  };
  c.body = [](const po::variables_map& vm) {
    const auto paths = vm["path"].as<std::vector<std::string>>();
    const bool diff = vm["diff"].as<bool>();
    const bool selections = vm["selections"].as<bool>();
    if (diff) {
      if (paths.size() != 2 || selections || vm.count("cell") > 0) {
        throw InputError(
            "inspect --diff takes exactly two study directories (and no --cell or "
            "--selections)");
      }
      return inspect_diff(paths[0], paths[1], std::cout);
    }
    if (paths.size() != 1) throw InputError("inspect takes one PATH (two only with --diff)");
    const std::string path = paths[0];
    if (selections || vm.count("cell") > 0 || vm.count("out") > 0) {
      if (!selections || vm.count("cell") == 0) {
        throw InputError(
            "inspect: --cell ID and --selections go together (with a study "
            "directory)");
      }
      InspectSelectionsOptions o;
      o.study = path;
      o.cell = vm["cell"].as<std::string>();
      if (vm.count("out") > 0) o.out = vm["out"].as<std::string>();
      if (vm.count("manifest") > 0) o.manifest = vm["manifest"].as<std::string>();
      return inspect_selections(o);
    }
    if (ends_with(path, ".toml")) {
      const auto m = manifest::load_manifest(path);
      std::cout << "sha256 " << manifest::manifest_sha256(m) << "\n"
                << manifest::canonical_json(m).dump(2) << "\n";
      return 0;
    }
    if (ends_with(path, ".h5") || ends_with(path, ".h5.tmp")) {
      records::describe_shard(path, std::cout);
      return 0;
    }
    if (std::filesystem::is_directory(path)) {
      const std::filesystem::path dir(path);
      if (std::filesystem::exists(dir / manifest::kPreregFile)) {
        const auto j = manifest::load_prereg(dir);
        std::cout << "preregistration  " << (dir / manifest::kPreregFile).string() << "\n"
                  << "study            " << j.value("study", "") << "\n"
                  << "sha256           " << j["manifest_sha256"].get<std::string>() << "\n"
                  << "created          " << j.value("created_utc", "") << "\n"
                  << "cells            " << j["counts"].value("cells", 0) << "\n\n";
      }
      const auto shards = std::filesystem::is_directory(dir / "shards") ? dir / "shards" : dir;
      records::describe_study(shards, std::cout);
      return 0;
    }
    throw InputError(path + ": not a manifest (.toml), a shard (.h5, .h5.tmp) or a directory");
  };
  return c;
}

}  // namespace kvaudit::cli
