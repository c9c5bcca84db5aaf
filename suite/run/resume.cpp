// Resume scan, salvage republishing and the remaining work (see resume.h).
#include "suite/run/resume.h"

#include <algorithm>

#include "suite/records/shard_reader.h"

namespace kvaudit::run {

ResumeScan scan_for_resume(const std::filesystem::path& shards_dir,
                           const std::string& manifest_sha256) {
  ResumeScan scan;
  if (!std::filesystem::exists(shards_dir)) return scan;
  records::StudyReadOptions options;
  options.salvage = true;
  options.expected_manifest_sha256 = manifest_sha256;
  const records::StudyRecords study = records::read_study(shards_dir, options);

  scan.published_shards = study.published.size();
  scan.published_records = study.n_from_published;
  scan.duplicate_records = study.duplicates.size();
  scan.temporary_shards = study.temporary.size();
  for (const auto& shard : study.published) {
    scan.previous_attempts = std::max(scan.previous_attempts, shard.provenance.attempt);
  }
  scan.done_cells.reserve(study.records.size());
  for (std::size_t i = 0; i < study.records.size(); ++i) {
    const auto& record = study.records[i];
    scan.previous_attempts = std::max(scan.previous_attempts, static_cast<int>(record.attempt));
    scan.done_cells.push_back(record.cell_id);
    if (i >= study.n_from_published) scan.salvaged.push_back(record);
  }
  std::sort(scan.done_cells.begin(), scan.done_cells.end());

  if (!study.duplicates.empty()) {
    scan.messages.push_back(std::to_string(study.duplicates.size()) +
                            " cell(s) appear in more than one published shard (each is counted "
                            "once; first: cell " +
                            std::to_string(study.duplicates.front().cell_id) + " in " +
                            study.duplicates.front().duplicate_file.filename().string() + ")");
  }
  for (const auto& temp : study.temporary) {
    const std::string name = temp.file.filename().string();
    switch (temp.outcome) {
      case records::TempShardOutcome::salvaged:
        scan.messages.push_back("salvage " + name + ": " + std::to_string(temp.n_flushed) +
                                " flushed record(s), " + std::to_string(temp.n_added) + " new, " +
                                std::to_string(temp.n_already_present) + " already recorded");
        break;
      case records::TempShardOutcome::unreadable:
        scan.messages.push_back("salvage " + name + ": unreadable, its cells will be redone (" +
                                temp.message + ")");
        break;
      case records::TempShardOutcome::skipped:
        break;
    }
  }
  return scan;
}

std::filesystem::path publish_salvaged_records(std::span<const records::CellRecord> records,
                                               records::ShardWriterOptions options) {
  records::ShardWriter writer(std::move(options));
  for (const auto& record : records) writer.append(record);
  return writer.close_and_publish();
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
