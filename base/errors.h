// Error types and the process exit codes they map to (documented in docs/CLI.md).
#pragma once

#include <stdexcept>
#include <string>

namespace kvaudit {

// Exit codes of every kvaudit subcommand.
enum class ExitCode : int {
  ok = 0,              // the command did what was asked
  bad_input = 1,       // a manifest, model file, data set, argument or result directory is wrong
  internal_error = 2,  // a bug, an unavailable stage, or an environment failure (I/O, MPI, CUDA)
  incomplete = 3,      // stopped early (signal, time limit): cells remain; run again to resume
};

// Bad user input: the message names the file, the field and what is wrong.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something that is not the user's fault: I/O failures, library errors, broken invariants.
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvaudit
