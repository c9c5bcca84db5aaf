// Publishing files without ever replacing one: write to a unique temporary name beside the target,
// fsync, then link() it to the final name (link fails if the name exists, where rename() would
// silently replace), unlink the temporary and fsync the directory.
#pragma once

#include <filesystem>
#include <string_view>

namespace kvaudit {

// Writes `content` to `target` unless `target` exists. Throws InputError if it exists (naming it),
// InternalError on I/O failure. On any failure nothing at `target` is created or changed.
void write_new_file(const std::filesystem::path& target, std::string_view content);

// Publishes an already-written file `tmp` under `target` with link()+unlink(); fsyncs `tmp` first
// and the directory after. Throws InputError if `target` exists (tmp is then left in place).
void publish_file(const std::filesystem::path& tmp, const std::filesystem::path& target);

// fsync of a file or directory by path; throws InternalError on failure.
void fsync_path(const std::filesystem::path& path);

}  // namespace kvaudit
