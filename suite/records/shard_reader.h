// Reading shards back: one shard (read_shard) or a whole study directory (read_study).
//
// read_shard validates what it reads (HDF5 file, /records present and 1-D, compound members with
// the expected classes and enum members, provenance attributes present and typed, schema_version
// supported, every row's record_digest from schema 3 on) and throws
// kvaudit::InputError("<file>: <what is wrong>") otherwise.
// read_study verifies every published shard (part-*.h5, in name order) against its SHA-256
// sidecar BEFORE HDF5 parses it (shard_checksum.h), reads shards no checksum vouches for in a child
// process first (isolated_read.h), merges them into records unique by (cell_id, question)
// (identical duplicates are a note; duplicates whose content differs are an InputError naming both
// shards and the fields, except a failed record replaced by a later attempt's retry), reports
// leftover temporary shards (part-*.h5.tmp), and optionally salvages their flushed, digest-verified
// records for cells no published shard holds.
#pragma once

#include <chrono>
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
  std::vector<std::filesystem::path> checksums;  // part-*.h5.sha256 sidecars, sorted by name
  std::vector<std::filesystem::path> ignored;    // other regular files, sorted by file name
};

// Lists `directory` (not recursively). Throws InputError if it is not a readable directory.
ShardListing list_shards(const std::filesystem::path& directory);

enum class ShardReadMode {
  // A published shard: the n_records attribute must equal the length of /records.
  published,
  // A temporary (or damaged) shard: read the first min(n_records, length) rows, i.e. what the
  // last completed flush wrote, in chunk-sized batches; a batch HDF5 cannot read (fletcher32
  // failure) and, from schema 3 on, a row whose record_digest does not match are left out and
  // counted instead of failing the shard.
  salvage,
};

struct ShardContents {
  std::filesystem::path file;
  ShardProvenance provenance;
  std::uint64_t n_records_attribute = 0;          // the n_records root attribute
  std::uint64_t n_rows = 0;                       // the length of /records
  std::optional<std::string> manifest_canonical;  // /provenance/manifest_canonical, if present
  std::vector<CellRecord> records;
  bool digests_checked = false;         // schema ≥ 3: every record kept matched its digest
  std::uint64_t n_rows_unreadable = 0;  // salvage: rows in batches HDF5 could not read
  std::uint64_t n_bad_digest = 0;       // salvage: rows dropped for a record_digest mismatch
};

ShardContents read_shard(const std::filesystem::path& file,
                         ShardReadMode mode = ShardReadMode::published);

struct StudyReadOptions {
  // Add the flushed records of temporary shards for cells not in any published shard.
  bool salvage = false;
  // When non-empty, every shard read must carry this manifest_sha256. When empty, every shard
  // must carry the same hash as the first published shard.
  std::string expected_manifest_sha256;
  // A published shard failing its checksum (or a schema-3 shard without one) is an InputError
  // unless this is set; then it is read in a child process in salvage mode and only its records
  // whose record_digest matches are used (shards of schema 1 and 2 have no digests: none are).
  bool salvage_corrupt = false;
  // How long a child process may take to read one unverified shard (isolated_read.h).
  std::chrono::milliseconds isolation_timeout{std::chrono::seconds(120)};
};

enum class ShardVerification {
  checksum,  // the SHA-256 sidecar matched before parsing
  legacy,    // schema 1 or 2, written before sidecars existed: read in a child first, unverified
  salvaged,  // damaged: only digest-verified records were used (salvage_corrupt)
};

struct PublishedShardInfo {
  std::filesystem::path file;
  ShardProvenance provenance;
  std::size_t n_records = 0;     // records in the shard
  std::size_t n_duplicates = 0;  // of which already present in an earlier shard
  ShardVerification verification = ShardVerification::checksum;
  std::size_t n_dropped = 0;  // salvaged: records left out (unreadable or failing their digest)
  std::string note;           // why it is not `checksum` (the check's message)
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
  std::size_t n_dropped = 0;          // flushed rows left out (unreadable or failing their digest)
  std::string message;                // why it is unreadable
  // The published shard of a later launch that republished this .tmp's records (its
  // `salvaged_from` attribute names it); "" when none did.
  std::filesystem::path republished_in;
};

struct DuplicateCell {
  std::uint64_t cell_id = 0;
  std::filesystem::path first_file;      // the shard whose record was kept
  std::filesystem::path duplicate_file;  // the shard whose record was not counted
  std::uint32_t question = 0;            // the record's question (reuse; 0 otherwise)
};

// A failed record (oom, error) replaced by the record of a later attempt (`run --retry-failed`).
struct RetriedCell {
  std::uint64_t cell_id = 0;
  std::filesystem::path failed_file;  // the shard holding the failed record (not used)
  std::filesystem::path retry_file;   // the shard holding the later attempt's record (used)
  CellStatus failed_status = CellStatus::error;
  std::uint32_t question = 0;  // the record's question (reuse; 0 otherwise)
};

struct StudyRecords {
  // Unique by (cell_id, question) — a reuse cell has one record per question of its context, the
  // other protocols one record per cell: records of published shards in shard-name and row order,
  // then salvaged records. The first n_from_published come from published shards.
  std::vector<CellRecord> records;
  // Parallel to `records`: whether the record comes from a temporary shard (salvage).
  std::vector<bool> from_temporary;
  std::size_t n_from_published = 0;  // records that come from published shards
  std::string manifest_sha256;       // the hash all shards carry ("" when there is none)
  std::vector<PublishedShardInfo> published;
  std::vector<TempShardInfo> temporary;
  std::vector<std::filesystem::path> ignored;
  std::vector<DuplicateCell> duplicates;  // identical records of a cell in more than one shard
  std::vector<RetriedCell> retried;       // failed records replaced by a later attempt's
  std::vector<std::string> warnings;      // salvaged/skipped/legacy/damaged shards, one line each
};

// One published shard as read_study reads it: verified against its SHA-256 sidecar before it is
// parsed; without one (schema 1 and 2) read in a child process first; a damaged one is an
// InputError naming it, or with options.salvage_corrupt its digest-verified records. Sets
// info.verification, info.note and info.n_dropped.
ShardContents read_verified_shard(const std::filesystem::path& file,
                                  const StudyReadOptions& options, PublishedShardInfo& info);

// Throws InputError for a malformed or damaged published shard (unless salvage_corrupt), a
// salvaged shard whose manifest hash differs, and duplicates whose content differs (every
// conflicting cell's two shards and differing fields listed, up to 20); unreadable temporary
// shards are only reported.
StudyRecords read_study(const std::filesystem::path& directory,
                        const StudyReadOptions& options = {});

std::string_view to_string(TempShardOutcome outcome);
std::string_view to_string(ShardVerification verification);

}  // namespace kvaudit::records
