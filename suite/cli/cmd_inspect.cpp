// kvaudit inspect PATH: shows what kvaudit sees in a manifest (its canonical form and SHA-256),
// a study directory (preregistration and shards) or one HDF5 shard (provenance and records).
#include <iostream>

#include "suite/cli/command.h"
#include "base/errors.h"
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
  c.usage = "kvaudit inspect PATH   (PATH: MANIFEST.toml | RESULTS_DIR | SHARD.h5[.tmp])";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("path", po::value<std::string>()->required(), "what to inspect");
    p.add("path", 1);
  };
  c.body = [](const po::variables_map& vm) {
    const std::string path = vm["path"].as<std::string>();
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
