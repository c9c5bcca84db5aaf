// gnuplot subprocess (see gnuplot_runner.h).
#include "suite/reduce/gnuplot_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

namespace kvaudit::reduce {

std::optional<std::filesystem::path> find_gnuplot() {
  if (const char* env = std::getenv("KVAUDIT_GNUPLOT"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) == 0) return std::filesystem::path(env);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const auto candidate = std::filesystem::path(dir) / "gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

GnuplotRun run_gnuplot(const std::filesystem::path& gnuplot, const std::filesystem::path& script,
                       int timeout_s) {
  GnuplotRun run;
  const std::filesystem::path dir = script.parent_path();
  const std::string log = (dir / (script.filename().string() + ".log")).string();
  const std::string exe = gnuplot.string();
  const std::string name = script.filename().string();
  const pid_t pid = ::fork();
  if (pid < 0) {
    run.message = std::string("fork failed: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    std::vector<char*> argv{const_cast<char*>(exe.c_str()), const_cast<char*>(name.c_str()),
                            nullptr};
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      run.message = std::string("waitpid failed: ") + std::strerror(errno);
      return run;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      run.message = "gnuplot did not finish within " + std::to_string(timeout_s) + " s";
      return run;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) {
    run.exit_status = WEXITSTATUS(status);
    run.ok = run.exit_status == 0;
    if (!run.ok)
      run.message = "gnuplot exited with status " + std::to_string(run.exit_status) + " (see " +
                    std::filesystem::path(log).filename().string() + ")";
  } else {
    run.message = "gnuplot was killed by a signal";
  }
  return run;
}

}  // namespace kvaudit::reduce
