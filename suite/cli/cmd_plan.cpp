// kvaudit plan MANIFEST: validate, expand into units and cells, print the expansion, check that
// the files it names exist, and write the preregistration lock <output_dir>/prereg.json.
#include <iostream>

#include "suite/cli/command.h"
#include "suite/cli/study_paths.h"
#include "suite/common/errors.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/plan_summary.h"
#include "suite/manifest/prereg.h"

namespace kvaudit::cli {

Command plan_command() {
  Command c;
  c.name = "plan";
  c.summary = "validate a manifest, print its expansion and write the preregistration lock";
  c.usage = "kvaudit plan MANIFEST [--output-dir DIR] [--dry-run]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("manifest", po::value<std::string>()->required(), "the study manifest (TOML)")(
        "output-dir", po::value<std::string>(),
        "write prereg.json here instead of study.output_dir")(
        "dry-run", "print the expansion and check paths; write nothing");
    p.add("manifest", 1);
  };
  c.body = [](const po::variables_map& vm) {
    const auto m = manifest::load_manifest(vm["manifest"].as<std::string>());
    const auto ex = manifest::expand(m);
    const auto summary = manifest::summarize(m, ex);
    manifest::print_plan(std::cout, m, ex, summary);
    std::cout.flush();
    require_paths_exist(m, "nothing was written");
    const auto out = study_output_dir(m, vm);
    if (vm.count("dry-run")) {
      std::cout << "\ndry run: nothing written (the lock would be "
                << (out / manifest::kPreregFile).string() << ")\n";
      return 0;
    }
    const auto outcome = manifest::write_prereg(out, manifest::make_prereg(m, ex, summary));
    if (outcome == manifest::PreregOutcome::written) {
      std::cout << "\npreregistered: wrote " << (out / manifest::kPreregFile).string() << "\n";
    } else {
      std::cout << "\npreregistered already: " << (out / manifest::kPreregFile).string()
                << " locks this manifest (unchanged)\n";
    }
    return 0;
  };
  return c;
}

}  // namespace kvaudit::cli
