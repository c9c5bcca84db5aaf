// The shape every kvaudit subcommand shares: a name, a one-line summary, options parsed with
// Boost.Program_options, and a body whose exceptions become the documented exit codes
// (docs/CLI.md): InputError -> 1, InternalError and anything else -> 2.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kvaudit::cli {

namespace po = boost::program_options;

struct Command {
  std::string name;
  std::string summary;
  std::string usage;  // e.g. "kvaudit plan MANIFEST [options]"
  std::function<void(po::options_description&, po::positional_options_description&)> options;
  std::function<int(const po::variables_map&)> body;
};

const std::vector<Command>& commands();

// Parses argv for `cmd`, prints --help, runs the body and maps exceptions to exit codes.
int run_command(const Command& cmd, const std::vector<std::string>& args);

Command plan_command();
Command run_stage_command();
Command reduce_command();
Command generate_command();
Command inspect_command();
Command bundle_command();
Command verify_command();
Command stats_command();
Command version_command();

}  // namespace kvaudit::cli
