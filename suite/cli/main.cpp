// kvaudit: plan, run, reduce, generate, inspect, version. See docs/CLI.md.
#include <iostream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runners/cpu/openblas_core.h"
#include "suite/cli/command.h"

namespace {

void print_usage(std::ostream& os) {
  os << "usage: kvaudit COMMAND [options]   (kvaudit COMMAND --help for details)\n\n"
        "KV-cache eviction audits: preregistered manifests, HDF5 records, defensible "
        "statistics.\n\n"
        "commands:\n";
  for (const auto& c : kvaudit::cli::commands()) {
    os << "  " << c.name << std::string(10 - c.name.size(), ' ') << c.summary << "\n";
  }
  os << "\nexit codes: 0 ok, 1 bad input, 2 internal error or unavailable stage, "
        "3 incomplete (resume)\n";
}

}  // namespace

int main(int argc, char** argv) {
  using kvaudit::ExitCode;
  if (argc < 2) {
    print_usage(std::cerr);
    return static_cast<int>(ExitCode::bad_input);
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return static_cast<int>(ExitCode::ok);
  }
  // Commands that run the model need OpenBLAS's fast kernels; this may re-execute the process with
  // OPENBLAS_CORETYPE set (runners/cpu/openblas_core.h) before anything else happens. inspect
  // (--selections) and verify (--rerun) re-derive recorded cells: they must use the kernels
  // `kvaudit run` used, or near-tied scores keep other positions (a different summation order).
  if (name == "generate" || name == "run" || name == "inspect" || name == "verify") {
    kvaudit::cpu::ensure_fast_openblas_core(argv);
  }
  for (const auto& c : kvaudit::cli::commands()) {
    if (c.name == name || (name == "--version" && c.name == "version")) {
      return kvaudit::cli::run_command(c, std::vector<std::string>(argv + 2, argv + argc));
    }
  }
  std::cerr << "kvaudit: unknown command '" << name << "'\n\n";
  print_usage(std::cerr);
  return static_cast<int>(ExitCode::bad_input);
}
