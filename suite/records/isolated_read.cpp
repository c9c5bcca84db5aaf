// Reading an unverified shard in a child process first (see isolated_read.h).
#include "suite/records/isolated_read.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "base/errors.h"

namespace kvaudit::records {
namespace {

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void child_main(int fd, const std::filesystem::path& file, ShardReadMode mode) {
  int code = 0;
  try {
    (void)read_shard(file, mode);
  } catch (const std::exception& e) {
    write_all(fd, e.what());
    code = 1;
  } catch (...) {
    write_all(fd, file.string() + ": unknown error while reading");
    code = 1;
  }
  ::close(fd);
  ::_exit(code);  // no atexit handlers, no MPI, no destructors of the parent's objects
}

}  // namespace

ProbeResult probe_shard_isolated(const std::filesystem::path& file, ShardReadMode mode,
                                 std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw InternalError(std::string("pipe2 failed: ") + std::strerror(errno));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw InternalError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {
    ::close(fds[0]);
    child_main(fds[1], file, mode);
  }
  ::close(fds[1]);

  std::string message;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: it is exiting
    if (message.size() < 65536) message.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }

  ProbeResult result;
  const std::string name = file.string();
  if (timed_out) {
    result.outcome = ProbeOutcome::timed_out;
    result.message = name + ": reading it did not finish within " +
                     std::to_string(timeout.count() / 1000) +
                     " s (HDF5 hangs on some damaged files); not used";
  } else if (WIFSIGNALED(status)) {
    result.outcome = ProbeOutcome::crashed;
    result.message = name + ": reading it crashed the HDF5 library (" +
                     strsignal(WTERMSIG(status)) + ") — the file is damaged; not used";
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    result.outcome = ProbeOutcome::refused;
    result.message = message.empty() ? name + ": unreadable" : message;
  }
  return result;
}

ShardContents read_shard_isolated(const std::filesystem::path& file, ShardReadMode mode,
                                  std::chrono::milliseconds timeout) {
  const ProbeResult probe = probe_shard_isolated(file, mode, timeout);
  if (probe.outcome != ProbeOutcome::readable) throw InputError(probe.message);
  return read_shard(file, mode);
}

}  // namespace kvaudit::records
