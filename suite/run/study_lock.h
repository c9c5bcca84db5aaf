// One `kvaudit run` per study directory at a time: rank 0 holds an exclusive flock() on
// <output_dir>/run.lock for the whole launch. A second launch on the same directory (another
// terminal, a duplicated Slurm job) fails at once with exit 1 naming the holder, instead of
// repeating every unit the first one runs.
//
// The lock file is created once and never deleted (deleting it would let two launches lock two
// different files); it holds one line describing the current holder (pid, host, start time),
// rewritten by each holder. The kernel releases the lock when the holder exits, however it exits
// (SIGKILL included), so a crashed launch never blocks the next. flock() works on local file
// systems and NFSv4; on file systems without it (some Lustre mounts without -o flock) the lock
// cannot be taken and the launch fails, naming the file and the error.
#pragma once

#include <filesystem>
#include <string>

namespace kvaudit::run {

inline constexpr const char* kStudyLockFile = "run.lock";

class StudyDirectoryLock {
 public:
  // Takes the lock without waiting. InputError "<dir>/run.lock: another `kvaudit run` is using
  // this study (<holder line>)" when it is held; InternalError on other failures.
  explicit StudyDirectoryLock(const std::filesystem::path& output_dir);
  ~StudyDirectoryLock();
  StudyDirectoryLock(const StudyDirectoryLock&) = delete;
  StudyDirectoryLock& operator=(const StudyDirectoryLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace kvaudit::run
