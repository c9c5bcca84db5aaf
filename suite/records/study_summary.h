// Human-readable descriptions of a shard and of a study directory, for `kvaudit inspect`.
#pragma once

#include <filesystem>
#include <ostream>

namespace kvaudit::records {

// Prints the shard's state (published or temporary), its checksum, record counts by status, the
// provenance attributes and whether the canonical manifest is embedded. A published shard is
// verified against its sidecar first (a mismatch is an InputError); a shard no sidecar vouches for
// is read in a child process first. A temporary shard is read the way salvage reads it. Throws
// InputError if the file is not a valid shard.
void describe_shard(const std::filesystem::path& file, std::ostream& out);

// Prints the study's manifest hash, published shards (records, rank, host, attempt), temporary
// shards (how many flushed records salvage would recover, or why they are unreadable), ignored
// files, duplicates, unique cells by status and differences between shards' builds, hosts and
// GPUs. Problems with individual shards are printed, not thrown; only a directory that cannot be
// listed throws InputError.
void describe_study(const std::filesystem::path& directory, std::ostream& out);

}  // namespace kvaudit::records
