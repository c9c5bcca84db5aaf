// kvaudit bundle STUDY_DIR --out PATH [--partial]: a study packed for artifact evaluation
// (suite/artifacts/bundle_writer.h; docs/ARTIFACTS.md).
#include <iostream>

#include "suite/artifacts/bundle_writer.h"
#include "suite/cli/command.h"

namespace kvaudit::cli {

Command bundle_command() {
  Command c;
  c.name = "bundle";
  c.summary = "pack a study (lock, manifest, shards, report, checksums, README) for evaluators";
  c.usage = "kvaudit bundle RESULTS_DIR --out BUNDLE_DIR|BUNDLE.tar [--partial]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("study", po::value<std::string>()->required(),
                    "the study's output directory (prereg.json, shards/, report/)")(
        "out", po::value<std::string>()->required(),
        "a new directory, or a new FILE.tar (never overwritten)")(
        "partial", po::bool_switch(),
        "bundle a study whose coverage is incomplete (the README says so)");
    p.add("study", 1);
  };
  c.body = [](const po::variables_map& vm) {
    artifacts::BundleOptions o;
    o.study = vm["study"].as<std::string>();
    o.out = vm["out"].as<std::string>();
    o.partial = vm["partial"].as<bool>();
    artifacts::make_bundle(o, std::cerr);
    return 0;
  };
  return c;
}

}  // namespace kvaudit::cli
