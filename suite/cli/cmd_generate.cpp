// kvaudit generate ruler|longbench ...: writes inspectable benchmark instances. The RULER generator
// and the LongBench loader arrive with the benchmarks issue; until then this says so.
#include <iostream>

#include "suite/cli/command.h"
#include "suite/common/errors.h"

namespace kvaudit::cli {

Command generate_command() {
  Command c;
  c.name = "generate";
  c.summary = "write benchmark instances (RULER, LongBench) as JSONL for inspection";
  c.usage = "kvaudit generate ruler --model PATH --length N --tasks T,... --instances K --out FILE";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("benchmark", po::value<std::string>()->required(), "ruler or longbench")(
        "args", po::value<std::vector<std::string>>(), "benchmark options");
    p.add("benchmark", 1).add("args", -1);
  };
  c.body = [](const po::variables_map& vm) -> int {
    const std::string b = vm["benchmark"].as<std::string>();
    if (b != "ruler" && b != "longbench") {
      throw InputError("unknown benchmark '" + b + "' (expected ruler or longbench)");
    }
    std::cerr << "kvaudit generate: the " << b
              << " generator is not in this build yet (it arrives with the benchmarks issue; "
                 "docs/CLI.md). Nothing was written.\n";
    return static_cast<int>(ExitCode::internal_error);
  };
  return c;
}

}  // namespace kvaudit::cli
