// Reading shards back: one shard (read_shard) or a whole study directory (read_study).
//
// read_shard validates what it reads (HDF5 file, /records present and 1-D, compound members with
// the expected classes and enum members, provenance attributes present and typed, schema_version
// supported) and throws kvaudit::InputError("<file>: <what is wrong>") otherwise.
// read_study merges published shards (part-*.h5, in name order) into records unique by cell_id,
// reports duplicates and leftover temporary shards (part-*.h5.tmp), and optionally salvages the
// flushed records of temporary shards for cells no published shard holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "suite/records/cell_record.h"
#include "suite/records/provenance.h"

namespace kvaudit::records {

struct ShardListing {
  std::vector<std::filesystem::path> published;  // part-*.h5, sorted by file name
  std::vector<std::filesystem::path> temporary;  // part-*.h5.tmp, sorted by file name
  std::vector<std::filesystem::path> ignored;    // other regular files, sorted by file name
};

// Lists `directory` (not recursively). Throws InputError if it is not a readable directory.
ShardListing list_shards(const std::filesystem::path& directory);

enum class ShardReadMode {
  // A published shard: the n_records attribute must equal the length of /records.
  published,
  // A temporary shard left by a crash: read the first min(n_records, length) rows, i.e. what the
  // last completed flush wrote.
  salvage,
};

struct ShardContents {
  std::filesystem::path file;
  ShardProvenance provenance;
  std::uint64_t n_records_attribute = 0;          // the n_records root attribute
  std::uint64_t n_rows = 0;                       // the length of /records
  std::optional<std::string> manifest_canonical;  // /provenance/manifest_canonical, if present
  std::vector<CellRecord> records;
};

ShardContents read_shard(const std::filesystem::path& file,
                         ShardReadMode mode = ShardReadMode::published);

struct StudyReadOptions {
  // Add the flushed records of temporary shards for cells not in any published shard.
  bool salvage = false;
  // When non-empty, every shard read must carry this manifest_sha256. When empty, every shard
  // must carry the same hash as the first published shard.
  std::string expected_manifest_sha256;
};

struct PublishedShardInfo {
  std::filesystem::path file;
  ShardProvenance provenance;
  std::size_t n_records = 0;     // records in the shard
  std::size_t n_duplicates = 0;  // of which already present in an earlier shard
};

enum class TempShardOutcome {
  skipped,     // not opened (salvage off)
  salvaged,    // opened; its new cells were added
  unreadable,  // HDF5 could not open it (killed while being created, or locked by a live writer)
               // or it is not a valid shard; reported, not an error for the study
};

struct TempShardInfo {
  std::filesystem::path file;
  TempShardOutcome outcome = TempShardOutcome::skipped;
  std::size_t n_flushed = 0;          // records the last flush left on disk (salvaged only)
  std::size_t n_added = 0;            // of which added to the study
  std::size_t n_already_present = 0;  // of which some shard read before already held
  std::string message;                // why it is unreadable
};

struct DuplicateCell {
  std::uint64_t cell_id = 0;
  std::filesystem::path first_file;      // the shard whose record was kept
  std::filesystem::path duplicate_file;  // the shard whose record was not counted
};

struct StudyRecords {
  // Unique by cell_id: records of published shards in shard-name and row order, then salvaged
  // records. The first n_from_published come from published shards.
  std::vector<CellRecord> records;
  std::size_t n_from_published = 0;
  std::string manifest_sha256;  // the hash all shards carry ("" when there is none)
  std::vector<PublishedShardInfo> published;
  std::vector<TempShardInfo> temporary;
  std::vector<std::filesystem::path> ignored;
  std::vector<DuplicateCell> duplicates;  // cells seen in more than one published shard
  std::vector<std::string> warnings;      // one line per salvaged shard and per skipped shard
};

// Throws InputError for a malformed published shard or a salvaged shard whose manifest hash
// differs; unreadable temporary shards are only reported.
StudyRecords read_study(const std::filesystem::path& directory,
                        const StudyReadOptions& options = {});

std::string_view to_string(TempShardOutcome outcome);

}  // namespace kvaudit::records
