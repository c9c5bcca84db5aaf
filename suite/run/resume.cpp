// Resume scan, salvage republishing and the remaining work (see resume.h).
#include "suite/run/resume.h"

#include <algorithm>

#include "base/errors.h"
#include "suite/records/record_comparison.h"
#include "suite/records/shard_reader.h"

namespace kvaudit::run {

ResumeScan scan_for_resume(const std::filesystem::path& shards_dir,
                           const std::string& manifest_sha256, const ResumeOptions& resume) {
  ResumeScan scan;
  if (!std::filesystem::exists(shards_dir)) return scan;
  records::StudyReadOptions options;
  options.salvage = true;
  options.expected_manifest_sha256 = manifest_sha256;
  options.salvage_corrupt = resume.salvage_corrupt;
  const records::StudyRecords study = records::read_study(shards_dir, options);

  scan.published_shards = study.published.size();
  scan.published_records = study.n_from_published;
  scan.duplicate_records = study.duplicates.size();
  scan.temporary_shards = study.temporary.size();
  for (const auto& shard : study.published) {
    scan.previous_attempts = std::max(scan.previous_attempts, shard.provenance.attempt);
  }
  scan.done_cells.reserve(study.records.size());
  scan.done_records.reserve(study.records.size());
  for (std::size_t i = 0; i < study.records.size(); ++i) {
    const auto& record = study.records[i];
    scan.previous_attempts = std::max(scan.previous_attempts, static_cast<int>(record.attempt));
    if (study.from_temporary[i]) scan.salvaged.push_back(record);
    if (resume.retry_failed && records::is_retryable_status(record.status)) {
      ++scan.failed_to_retry;
      continue;
    }
    scan.done_records.push_back(DoneRecord{record.cell_id, record.status, record.score,
                                           record.question, std::max(record.n_questions, 1u)});
  }
  std::sort(scan.done_records.begin(), scan.done_records.end(),
            [](const DoneRecord& a, const DoneRecord& b) {
              return a.cell_id != b.cell_id ? a.cell_id < b.cell_id : a.question < b.question;
            });
  // A reuse cell is done when the records of all its questions are (records are unique by
  // (cell_id, question)); a partial set is run again whole, and the records it repeats are
  // identical duplicates, counted once (docs/RECORDS.md §Versions).
  std::vector<DoneRecord> complete;
  complete.reserve(scan.done_records.size());
  for (std::size_t i = 0; i < scan.done_records.size();) {
    std::size_t end = i + 1;
    while (end < scan.done_records.size() &&
           scan.done_records[end].cell_id == scan.done_records[i].cell_id) {
      ++end;
    }
    if (end - i == scan.done_records[i].n_questions) complete.push_back(scan.done_records[i]);
    i = end;
  }
  scan.done_records = std::move(complete);
  for (const auto& done : scan.done_records) scan.done_cells.push_back(done.cell_id);
  const bool any_random = std::any_of(study.records.begin(), study.records.end(),
                                      [](const auto& r) { return r.method_id == "random"; });
  for (const auto& shard : study.published) {
    if (any_random && shard.provenance.schema_version < 4) {
      scan.backend_keyed_random_shard = shard.file.filename().string();
      break;
    }
  }

  if (!study.duplicates.empty()) {
    scan.messages.push_back(std::to_string(study.duplicates.size()) +
                            " cell(s) have identical records in more than one shard (each is "
                            "counted once; first: cell " +
                            std::to_string(study.duplicates.front().cell_id) + " in " +
                            study.duplicates.front().duplicate_file.filename().string() + ")");
  }
  if (!study.retried.empty()) {
    scan.messages.push_back(std::to_string(study.retried.size()) +
                            " failed record(s) replaced by a later attempt's (--retry-failed)");
  }
  for (const auto& shard : study.published) {
    if (shard.verification != records::ShardVerification::checksum) {
      scan.messages.push_back(shard.note);
    }
  }
  for (const auto& temp : study.temporary) {
    const std::string name = temp.file.filename().string();
    switch (temp.outcome) {
      case records::TempShardOutcome::salvaged:
        if (temp.n_added > 0) scan.salvaged_from.push_back(name);
        if (temp.n_added == 0 && temp.n_dropped == 0 && !temp.republished_in.empty()) break;
        scan.messages.push_back("salvage " + name + ": " + std::to_string(temp.n_flushed) +
                                " flushed record(s), " + std::to_string(temp.n_added) + " new, " +
                                std::to_string(temp.n_already_present) + " already recorded" +
                                (temp.n_dropped > 0
                                     ? ", " + std::to_string(temp.n_dropped) + " damaged (left out)"
                                     : ""));
        break;
      case records::TempShardOutcome::unreadable:
        scan.messages.push_back("salvage " + name +
                                ": unreadable; cells it held that no published shard has will "
                                "be run again (" +
                                temp.message + ")");
        break;
      case records::TempShardOutcome::skipped:
        break;
    }
  }
  return scan;
}

std::filesystem::path publish_salvaged_records(std::span<const records::CellRecord> records,
                                               std::span<const std::string> salvaged_from,
                                               records::ShardWriterOptions options) {
  std::string from;
  for (const auto& name : salvaged_from) from += name + "\n";
  options.provenance.salvaged_from = from;
  records::ShardWriter writer(std::move(options));
  for (const auto& record : records) writer.append(record);
  return writer.close_and_publish();
}

void require_same_random_keys(const ResumeScan& scan, std::size_t pending_random_cells,
                              const std::filesystem::path& shards_dir) {
  if (scan.backend_keyed_random_shard.empty() || pending_random_cells == 0) return;
  throw InputError((shards_dir / scan.backend_keyed_random_shard).string() +
                   ": written by a kvaudit before records schema version 4, whose random method "
                   "keyed its draws by the attention backend; this kvaudit keys them without it "
                   "(the same cell keeps the same positions under sdpa and eager), so the " +
                   std::to_string(pending_random_cells) +
                   " pending random cell(s) would not match the recorded ones. Finish this study "
                   "with the kvaudit that started it, or plan it again in a new output directory; "
                   "nothing was run");
}

std::vector<PendingUnit> pending_units(const manifest::Expansion& expansion,
                                       std::span<const std::uint64_t> done_cells,
                                       std::size_t* unknown_done) {
  std::vector<PendingUnit> pending(expansion.units.size());
  for (std::size_t u = 0; u < pending.size(); ++u) pending[u].unit = u;
  std::size_t matched = 0;
  for (std::size_t c = 0; c < expansion.cells.size(); ++c) {
    const auto id = expansion.cells[c].id;
    if (std::binary_search(done_cells.begin(), done_cells.end(), id)) {
      ++matched;
      continue;
    }
    pending.at(expansion.cells[c].unit).cells.push_back(c);
  }
  if (unknown_done != nullptr) *unknown_done = done_cells.size() - matched;
  std::erase_if(pending, [](const PendingUnit& p) { return p.cells.empty(); });
  return pending;
}

}  // namespace kvaudit::run
