// Resume: which cells of a study are already done, and what remains.
//
// Policy (docs/RECORDS.md "Resume policy", docs/design/hpc.md §Resume and §HDF5 crash
// consistency):
//   * A cell is done when a *published* shard of this study (part-*.h5 carrying the locked
//     manifest SHA-256) holds its record, whatever the record's status: failed cells (oom, error)
//     and excluded cells are records too and are not retried — unless the launch asks for it
//     (`kvaudit run --retry-failed`: cells whose record is oom or error are run again; the new
//     record of the later attempt replaces the failed one when the study is read, shard_reader.h).
//   * Every published shard is checked against its SHA-256 sidecar before it is parsed; a damaged
//     one stops the launch (InputError naming it) unless salvage_corrupt is set.
//   * Temporary shards (part-*.h5.tmp) are left by ranks that died (SIGKILL, OOM killer, node
//     loss). Their flushed records are salvaged with read_study(salvage = true), which adds a
//     record only for a cell that no published shard holds; rank 0 then republishes exactly those
//     records in a new shard of the new attempt (publish_salvaged_records), so the GPU time they
//     cost is kept and every cell is counted once. The .tmp files themselves are never modified or
//     deleted (a later read_study reports them as skipped; with salvage their cells are already
//     present, so nothing is counted twice). A .tmp that HDF5 cannot open (killed while being
//     created, or locked by a live writer) is reported and its cells are redone.
//   * The attempt number of a launch is 1 + the largest attempt seen: the `attempt` attribute of
//     every published shard and the `attempt` field of every record read (published or salvaged).
//   * Run this only when no writer of the study is alive (a new launch of `kvaudit run`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/records/cell_record.h"
#include "suite/records/shard_writer.h"

namespace kvaudit::run {

struct ResumeOptions {
  bool retry_failed = false;     // oom/error records do not count as done
  bool salvage_corrupt = false;  // StudyReadOptions::salvage_corrupt
};

// The outcome of a done cell, as sequential calibration needs it (suite/run/sequential_schedule.h).
struct DoneRecord {
  std::uint64_t cell_id = 0;
  records::CellStatus status = records::CellStatus::ok;
  double score = 0;               // a reuse cell: question 0's (reuse cells are never certified)
  std::uint32_t question = 0;     // the record's question (reuse; 0 otherwise)
  std::uint32_t n_questions = 1;  // the cell's records
};

struct ResumeScan {
  std::vector<std::uint64_t> done_cells;      // sorted, unique: published + salvaged
  std::vector<DoneRecord> done_records;       // the same cells in the same order, with outcomes (a
                                              // reuse cell: when all its questions are recorded)
  std::vector<records::CellRecord> salvaged;  // from .tmp shards, for cells no published shard has
  std::vector<std::string> salvaged_from;     // file names of the .tmp shards they come from
  std::size_t failed_to_retry = 0;            // retry_failed: oom/error cells left pending
  int previous_attempts = 0;                  // the largest attempt seen (0: none)
  std::size_t published_shards = 0;
  std::size_t published_records = 0;  // unique cells in published shards
  std::size_t duplicate_records = 0;  // cells seen in more than one published shard
  std::size_t temporary_shards = 0;
  std::vector<std::string> messages;  // one line per notable finding, for stderr
  // A published shard of records schema < 4 (random cells keyed by the attention backend) when
  // the study also holds records of the random method; "" otherwise (require_same_random_keys).
  std::string backend_keyed_random_shard;
};

// Refuses (InputError naming the shard and the way out) to add random cells keyed without the
// attention backend (records schema 4, methods/random.h) to a study whose recorded random cells
// were keyed with it, when cells of a `random` method config are still pending: the two halves of
// such a study would not be one preregistered draw. `pending_random_cells` = how many are pending.
void require_same_random_keys(const ResumeScan& scan, std::size_t pending_random_cells,
                              const std::filesystem::path& shards_dir);

// Scans <shards_dir> (absent: a first run, nothing done). Throws InputError for a malformed
// published shard or a shard of another manifest (read_study).
ResumeScan scan_for_resume(const std::filesystem::path& shards_dir,
                           const std::string& manifest_sha256, const ResumeOptions& options = {});

// Writes `records` into a new shard (options as for any shard of this launch; `salvaged_from`
// becomes its provenance attribute of that name) and publishes it; returns its path. The records
// keep their own attempt and rank fields (who computed them).
std::filesystem::path publish_salvaged_records(std::span<const records::CellRecord> records,
                                               std::span<const std::string> salvaged_from,
                                               records::ShardWriterOptions options);

// A unit with the cells of it not yet done.
struct PendingUnit {
  std::size_t unit = 0;            // index into Expansion::units
  std::vector<std::size_t> cells;  // indices into Expansion::cells, ascending (cell id order)
};

// Units with at least one cell not in `done_cells` (sorted), in unit order. Done ids the
// expansion does not have are counted in *unknown_done (may be null).
std::vector<PendingUnit> pending_units(const manifest::Expansion& expansion,
                                       std::span<const std::uint64_t> done_cells,
                                       std::size_t* unknown_done = nullptr);

}  // namespace kvaudit::run
