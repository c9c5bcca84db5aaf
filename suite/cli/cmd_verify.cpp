// kvaudit verify BUNDLE [--claims FILE] [--rerun K --model NAME=PATH …]: checks a study bundle
// (suite/artifacts/bundle_verifier.h; docs/ARTIFACTS.md).
#include <iostream>

#include "base/errors.h"
#include "suite/artifacts/bundle_verifier.h"
#include "suite/cli/command.h"

namespace kvaudit::cli {

Command verify_command() {
  Command c;
  c.name = "verify";
  c.summary = "check a study bundle: checksums, lock, the report recomputed, claims, re-runs";
  c.usage =
      "kvaudit verify BUNDLE [--claims FILE.csv] [--rerun K --model NAME=PATH ... "
      "[--rerun-seed S]]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("bundle", po::value<std::string>()->required(),
                    "the bundle (directory or .tar) made by kvaudit bundle")(
        "claims", po::value<std::string>(),
        "CSV table,row,column,value of numbers as a paper prints them")(
        "rerun", po::value<std::int64_t>()->default_value(0),
        "re-execute K recorded cells and compare them with the records")(
        "rerun-seed", po::value<std::uint64_t>()->default_value(0),
        "the seed of the choice of cells")(
        "model", po::value<std::vector<std::string>>()->composing(),
        "NAME=PATH: the weights of a manifest model for --rerun (must match the lock)")(
        "threads", po::value<int>()->default_value(0), "bootstrap threads (0: all)");
    p.add("bundle", 1);
  };
  c.body = [](const po::variables_map& vm) {
    artifacts::VerifyOptions o;
    o.bundle = vm["bundle"].as<std::string>();
    if (vm.count("claims") > 0) o.claims = vm["claims"].as<std::string>();
    o.rerun = vm["rerun"].as<std::int64_t>();
    o.rerun_seed = vm["rerun-seed"].as<std::uint64_t>();
    o.threads = vm["threads"].as<int>();
    if (o.rerun < 0) throw InputError("--rerun: must be ≥ 0");
    if (vm.count("model") > 0) {
      for (const std::string& spec : vm["model"].as<std::vector<std::string>>()) {
        const auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
          throw InputError("--model " + spec + ": expected NAME=PATH");
        }
        o.models[spec.substr(0, eq)] = spec.substr(eq + 1);
      }
      if (o.rerun == 0) throw InputError("--model is only used with --rerun K");
    }
    return artifacts::verify_bundle(o, std::cout);
  };
  return c;
}

}  // namespace kvaudit::cli
