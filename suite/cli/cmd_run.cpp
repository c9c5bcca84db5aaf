// kvaudit run MANIFEST: checks the manifest against its preregistration lock. Executing cells needs
// the model runtime, the methods and the MPI runner (later issues); until they exist this command
// says so and runs nothing.
#include <iostream>

#include "suite/cli/command.h"
#include "suite/cli/study_paths.h"
#include "suite/common/errors.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/prereg.h"

namespace kvaudit::cli {

Command run_stage_command() {
  Command c;
  c.name = "run";
  c.summary = "run a preregistered study's cells (under mpirun or srun) and record them";
  c.usage = "kvaudit run MANIFEST [--output-dir DIR]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("manifest", po::value<std::string>()->required(), "the study manifest (TOML)")(
        "output-dir", po::value<std::string>(),
        "the study directory given to plan, if not "
        "study.output_dir");
    p.add("manifest", 1);
  };
  c.body = [](const po::variables_map& vm) {
    const std::string file = vm["manifest"].as<std::string>();
    const auto m = manifest::load_manifest(file);
    require_paths_exist(m, "nothing was run");
    const std::string sha = manifest::manifest_sha256(m);
    const auto out = study_output_dir(m, vm);
    manifest::require_prereg_match(out, file, sha);
    std::cerr << "kvaudit run: " << file << " matches its preregistration ("
              << (out / manifest::kPreregFile).string() << ", sha256 " << sha << ").\n"
              << "kvaudit run: this build cannot execute cells yet: the model runtime, the "
                 "eviction methods and the distributed runner arrive with later issues "
                 "(docs/CLI.md). Nothing was run.\n";
    return static_cast<int>(ExitCode::internal_error);
  };
  return c;
}

}  // namespace kvaudit::cli
