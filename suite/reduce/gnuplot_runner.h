// Running gnuplot as a subprocess on a generated script: gnuplot is found as $KVAUDIT_GNUPLOT or
// `gnuplot` on PATH; the script runs in its own directory (so it names its data and outputs
// relatively and can be rerun by hand there), with stdout and stderr captured in <script>.log.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kvaudit::reduce {

// The gnuplot executable, or nullopt when there is none.
std::optional<std::filesystem::path> find_gnuplot();

struct GnuplotRun {
  bool ok = false;
  int exit_status = -1;
  std::string message;  // why it failed ("" when ok)
};

// Runs `gnuplot <script file name>` in the script's directory and waits (at most `timeout_s`
// seconds, then kills it).
GnuplotRun run_gnuplot(const std::filesystem::path& gnuplot, const std::filesystem::path& script,
                       int timeout_s = 120);

}  // namespace kvaudit::reduce
