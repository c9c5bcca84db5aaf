#include "suite/cli/command.h"

#include <iostream>

#include "base/errors.h"
#include "runners/model/model_error.h"
#include "suite/manifest/diagnostics.h"

namespace kvaudit::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      plan_command(),     run_stage_command(), reduce_command(),
      generate_command(), inspect_command(),   bundle_command(),
      verify_command(),   stats_command(),     version_command()};
  return all;
}

int run_command(const Command& cmd, const std::vector<std::string>& args) {
  po::options_description desc("Options");
  desc.add_options()("help,h", "print this help and exit");
  po::positional_options_description pos;
  if (cmd.options) cmd.options(desc, pos);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << cmd.usage << "\n\n" << cmd.summary << "\n\n" << desc;
      return static_cast<int>(ExitCode::ok);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "kvaudit " << cmd.name << ": " << e.what() << " (see kvaudit " << cmd.name
              << " --help)\n";
    return static_cast<int>(ExitCode::bad_input);
  }
  try {
    return cmd.body(vm);
  } catch (const manifest::ManifestError& e) {
    for (const auto& line : e.lines()) std::cerr << line << "\n";
    std::cerr << "kvaudit " << cmd.name << ": " << e.lines().size()
              << (e.lines().size() == 1 ? " problem" : " problems")
              << " in the manifest; nothing was written\n";
    return static_cast<int>(ExitCode::bad_input);
  } catch (const InputError& e) {
    std::cerr << "kvaudit " << cmd.name << ": " << e.what() << "\n";
    return static_cast<int>(ExitCode::bad_input);
  } catch (const model::ModelInputError& e) {
    std::cerr << "kvaudit " << cmd.name << ": " << e.what() << "\n";
    return static_cast<int>(ExitCode::bad_input);
  } catch (const std::exception& e) {
    std::cerr << "kvaudit " << cmd.name << ": internal error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::internal_error);
  }
}

}  // namespace kvaudit::cli
