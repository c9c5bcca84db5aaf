// Bundles as tar archives through GNU tar (see external_tar.h).
#include "suite/artifacts/external_tar.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/common/atomic_file.h"

extern char** environ;

namespace kvaudit::artifacts {
namespace {

namespace fs = std::filesystem;

struct Finished {
  int status = -1;  // exit code, or -1 when killed by a signal
  std::string out, err;
};

// Runs argv (PATH lookup for argv[0]) with stdin from /dev/null, collecting stdout and stderr.
Finished run(const std::vector<std::string>& args) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw InternalError(args[0] + ": cannot be started (" + std::strerror(spawned) +
                        "); tar bundles need GNU tar (Debian package tar)");
  }
  Finished f;
  std::array<pollfd, 2> fds{{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? f.out : f.err).append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  f.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return f;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

bool has_dot_dot(const std::string& name) {
  std::istringstream parts(name);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part == "..") return true;
  }
  return false;
}

}  // namespace

void create_tar(const fs::path& dir, const fs::path& out) {
  if (fs::exists(fs::symlink_status(out))) {
    throw InputError(out.string() + ": exists; a bundle is never written over anything");
  }
  const fs::path tmp = out.string() + ".tmp";
  fs::remove(tmp);
  const Finished f =
      run({"tar", "--create", "--file", tmp.string(), "--sort=name", "--owner=0", "--group=0",
           "--numeric-owner", "--mtime=@0", "--format=gnu", "--directory", dir.string(), "."});
  if (f.status != 0) {
    fs::remove(tmp);
    throw InternalError("tar --create " + out.string() + " failed: " + f.err);
  }
  publish_file(tmp, out);
}

void extract_tar(const fs::path& archive, const fs::path& into) {
  if (!fs::is_regular_file(archive)) {
    throw InputError(archive.string() + ": not a file");
  }
  const Finished names =
      run({"tar", "--list", "--file", archive.string(), "--quoting-style=escape"});
  const Finished verbose = run({"tar", "--list", "--verbose", "--file", archive.string(),
                                "--quoting-style=escape", "--numeric-owner"});
  if (names.status != 0 || verbose.status != 0) {
    throw InputError(archive.string() + ": not a readable tar archive (" +
                     (names.err.empty() ? verbose.err : names.err) + ")");
  }
  const std::vector<std::string> listed = lines_of(names.out);
  const std::vector<std::string> typed = lines_of(verbose.out);
  if (listed.size() != typed.size() || listed.size() > 1'000'000) {
    throw InputError(archive.string() + ": the member list cannot be read consistently");
  }
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const std::string& name = listed[i];
    if (name.empty() || name.front() == '/' || has_dot_dot(name)) {
      throw InputError(archive.string() + ": member '" + name +
                       "' would be written outside the bundle; refused, nothing extracted");
    }
    const char type = typed[i].empty() ? '?' : typed[i].front();
    if (type != '-' && type != 'd') {
      throw InputError(archive.string() + ": member '" + name +
                       "' is not a regular file or directory (tar type '" + std::string(1, type) +
                       "'); refused, nothing extracted");
    }
  }
  const Finished f = run({"tar", "--extract", "--file", archive.string(), "--directory",
                          into.string(), "--no-same-owner", "--no-same-permissions",
                          "--no-overwrite-dir", "--delay-directory-restore"});
  if (f.status != 0) {
    throw InputError(archive.string() + ": tar --extract failed: " + f.err);
  }
}

}  // namespace kvaudit::artifacts
