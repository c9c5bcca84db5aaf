#include "suite/common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/errors.h"

namespace kvaudit {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void fsync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InternalError("cannot open " + path.string() + " to fsync: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string err = rc != 0 ? errno_text() : std::string();
  ::close(fd);
  if (rc != 0) throw InternalError("fsync of " + path.string() + " failed: " + err);
}

void publish_file(const std::filesystem::path& tmp, const std::filesystem::path& target) {
  fsync_path(tmp);
  if (::link(tmp.c_str(), target.c_str()) != 0) {
    if (errno == EEXIST) {
      throw InputError(target.string() + ": already exists; refusing to overwrite it");
    }
    throw InternalError("cannot publish " + tmp.string() + " as " + target.string() + ": " +
                        errno_text());
  }
  if (::unlink(tmp.c_str()) != 0) {
    throw InternalError("published " + target.string() + " but cannot remove " + tmp.string() +
                        ": " + errno_text());
  }
  const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  fsync_path(dir);
}

void write_new_file(const std::filesystem::path& target, std::string_view content) {
  if (std::filesystem::exists(target)) {
    throw InputError(target.string() + ": already exists; refusing to overwrite it");
  }
  const std::filesystem::path tmp = target.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw InternalError("cannot create " + tmp.string() + ": " + errno_text());
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw InternalError("cannot write " + tmp.string() + ": " + err);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  try {
    publish_file(tmp, target);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace kvaudit
