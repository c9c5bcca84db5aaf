// The study directory's run lock (see study_lock.h).
#include "suite/run/study_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>

#include "base/errors.h"
#include "suite/common/utc_time.h"

namespace kvaudit::run {
namespace {

std::string read_holder(int fd) {
  std::array<char, 512> buffer{};
  const ssize_t n = ::pread(fd, buffer.data(), buffer.size() - 1, 0);
  if (n <= 0) return "holder unknown";
  std::string text(buffer.data(), static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "holder unknown" : text;
}

std::string host_name() {
  std::array<char, HOST_NAME_MAX + 1> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown host";
  return buffer.data();
}

}  // namespace

StudyDirectoryLock::StudyDirectoryLock(const std::filesystem::path& output_dir)
    : path_(output_dir / kStudyLockFile) {
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) throw InternalError("cannot create " + output_dir.string() + ": " + ec.message());
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw InputError(path_.string() +
                     ": cannot open the study's run lock: " + std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? read_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw InputError(path_.string() + ": another `kvaudit run` is using this study (" + holder +
                       "); wait for it to finish or stop it (SIGTERM), then run again");
    }
    throw InputError(path_.string() + ": cannot lock the study (flock: " + std::strerror(err) +
                     "); the file system must support flock()");
  }
  const std::string holder = "pid " + std::to_string(::getpid()) + " on " + host_name() +
                             " since " + utc_now_iso8601() + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t written = ::pwrite(fd_, holder.data(), holder.size(), 0);
    (void)written;  // the description is informative only; the lock is what counts
  }
}

StudyDirectoryLock::~StudyDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace kvaudit::run
