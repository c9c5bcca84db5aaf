// kvaudit: plan, run, reduce, generate, inspect, version. See docs/CLI.md.
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runners/cpu/cpu_isa.h"
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
  // Commands that run the model read KVAUDIT_CPU_ISA (runners/cpu/cpu_isa.h) first: a bad value
  // is refused before anything else happens. The level changes speed only, never a result.
  if (name == "generate" || name == "run" || name == "inspect" || name == "verify") {
    try {
      kvaudit::cpu::active_cpu_isa();
    } catch (const std::invalid_argument& e) {
      std::cerr << "kvaudit: " << e.what() << "\n";
      return static_cast<int>(ExitCode::bad_input);
    }
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
