// Bundles as tar archives through GNU tar (Debian's `tar`, run as a child process with an argument
// vector, never a shell): creating reproducible archives and extracting untrusted ones safely.
#pragma once

#include <filesystem>

namespace kvaudit::artifacts {

// tar of the contents of `dir` (paths relative to it, sorted, owner/group 0, mtime 0) into `out`
// (written as out.tmp, then published without replacing anything). InputError when `out` exists;
// InternalError when tar fails.
void create_tar(const std::filesystem::path& dir, const std::filesystem::path& out);

// Extracts `archive` into the empty directory `into`. Member names with a leading '/' or a ".."
// component, and members that are not regular files or directories (links, devices, FIFOs), are
// refused (InputError naming the archive and the member) before anything is extracted: the member
// list is read first (`tar -tvf`) and checked, then tar extracts with --no-same-owner
// --no-same-permissions --no-overwrite-dir.
void extract_tar(const std::filesystem::path& archive, const std::filesystem::path& into);

}  // namespace kvaudit::artifacts
