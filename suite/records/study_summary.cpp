// describe_shard / describe_study: text reports over read_shard and read_study.
#include "suite/records/study_summary.h"

#include <array>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/isolated_read.h"
#include "suite/records/shard_name.h"
#include "suite/records/shard_reader.h"

namespace kvaudit::records {
namespace {

constexpr std::size_t kMaxListedDuplicates = 20;

// Counts by status of records[i] for i < count with include(i).
template <typename Include>
void print_status_counts(std::ostream& out, const std::vector<CellRecord>& records,
                         std::size_t count, Include include) {
  std::array<std::size_t, EnumTraits<CellStatus>::members.size()> counts{};
  for (std::size_t i = 0; i < count; ++i) {
    if (include(i)) counts[static_cast<std::size_t>(records[i].status)] += 1;
  }
  out << "  by status:";
  for (const auto& member : EnumTraits<CellStatus>::members) {
    out << " " << member.name << "=" << counts[static_cast<std::size_t>(member.value)];
  }
  out << "\n";
}

// Prints "label: a, b" when shards disagree about a provenance field.
template <typename Get>
void print_if_mixed(std::ostream& out, const char* label,
                    const std::vector<PublishedShardInfo>& shards, Get get) {
  std::set<std::string> values;
  for (const auto& shard : shards) values.insert(get(shard.provenance));
  if (values.size() <= 1) return;
  out << "  " << label << " differ:";
  for (const auto& value : values) out << " '" << value << "'";
  out << "\n";
}

}  // namespace

void describe_shard(const std::filesystem::path& file, std::ostream& out) {
  const bool temporary = is_temp_shard_name(file.filename().string());
  // Only a shard its sidecar vouches for is parsed in this process (docs/RECORDS.md §Integrity).
  PublishedShardInfo info;
  const ShardContents shard =
      temporary ? read_shard_isolated(file, ShardReadMode::salvage, kDefaultIsolationTimeout)
                : read_verified_shard(file, StudyReadOptions{}, info);
  out << "shard: " << file.string() << "\n";
  out << "verification: "
      << (temporary ? std::string("none (unpublished; read in a child process first)")
          : info.verification == ShardVerification::checksum
              ? std::string("SHA-256 sidecar matches")
              : info.note)
      << "\n";
  out << "state: "
      << (temporary ? "unpublished temporary shard (records up to its last flush)" : "published")
      << "\n";
  out << "records: " << shard.records.size() << " (n_records attribute "
      << shard.n_records_attribute << ", /records rows " << shard.n_rows << ")\n";
  print_status_counts(out, shard.records, shard.records.size(), [](std::size_t) { return true; });
  out << "provenance:\n";
  for (const auto& [name, value] : provenance_items(shard.provenance)) {
    out << "  " << name << ": " << value << "\n";
  }
  if (shard.manifest_canonical) {
    out << "manifest_canonical: " << shard.manifest_canonical->size() << " bytes, sha256 "
        << sha256_hex(*shard.manifest_canonical) << "\n";
  } else {
    out << "manifest_canonical: absent\n";
  }
}

void describe_study(const std::filesystem::path& directory, std::ostream& out) {
  out << "study directory: " << directory.string() << "\n";
  StudyRecords study;
  try {
    // Salvage mode only to learn what the temporary shards hold; counts below keep them apart.
    StudyReadOptions options;
    options.salvage = true;
    study = read_study(directory, options);
  } catch (const InputError& e) {
    const ShardListing listing = list_shards(directory);
    out << "ERROR: " << e.what() << "\n";
    out << "published shards: " << listing.published.size() << "\n";
    for (const auto& file : listing.published) out << "  " << file.filename().string() << "\n";
    out << "temporary shards: " << listing.temporary.size() << "\n";
    for (const auto& file : listing.temporary) out << "  " << file.filename().string() << "\n";
    return;
  }
  out << "manifest_sha256: " << (study.manifest_sha256.empty() ? "-" : study.manifest_sha256)
      << "\n";

  std::size_t published_rows = 0;
  for (const auto& shard : study.published) published_rows += shard.n_records;
  out << "published shards: " << study.published.size() << " (" << published_rows << " records)\n";
  for (const auto& shard : study.published) {
    const ShardProvenance& p = shard.provenance;
    out << "  " << shard.file.filename().string() << ": " << shard.n_records << " records";
    if (shard.n_duplicates > 0) out << " (" << shard.n_duplicates << " duplicates)";
    if (shard.verification != ShardVerification::checksum) {
      out << " [" << to_string(shard.verification) << ": " << shard.note << "]";
    }
    out << ", rank " << p.rank << "/" << p.world_size << ", host " << p.hostname << ", attempt "
        << p.attempt << ", " << p.t_open_utc << " .. " << p.t_close_utc << "\n";
  }

  out << "temporary shards (unpublished): " << study.temporary.size() << "\n";
  for (const auto& shard : study.temporary) {
    out << "  " << shard.file.filename().string() << ": ";
    if (shard.outcome == TempShardOutcome::unreadable) {
      out << "unreadable (" << shard.message << ")\n";
    } else {
      out << shard.n_flushed << " flushed records, " << shard.n_added
          << " of them for cells no published shard holds (recoverable with salvage)";
      if (shard.n_dropped > 0) out << ", " << shard.n_dropped << " damaged";
      if (!shard.republished_in.empty()) {
        out << "; republished in " << shard.republished_in.filename().string();
      }
      out << "\n";
    }
  }
  if (!study.ignored.empty()) {
    out << "ignored files (not part-*.h5 / part-*.h5.tmp): " << study.ignored.size() << "\n";
    for (const auto& file : study.ignored) out << "  " << file.filename().string() << "\n";
  }

  out << "duplicates: " << study.duplicates.size()
      << " records repeat (with the same content) a cell already in an earlier published shard "
         "(counted once)\n";
  for (std::size_t i = 0; i < study.duplicates.size() && i < kMaxListedDuplicates; ++i) {
    const DuplicateCell& d = study.duplicates[i];
    out << "  cell " << d.cell_id << " (" << id_hex(d.cell_id) << "): kept from "
        << d.first_file.filename().string() << ", also in " << d.duplicate_file.filename().string()
        << "\n";
  }
  if (study.duplicates.size() > kMaxListedDuplicates) {
    out << "  ... and " << study.duplicates.size() - kMaxListedDuplicates << " more\n";
  }

  out << "unique cells in published shards: " << study.n_from_published << "\n";
  print_status_counts(out, study.records, study.records.size(),
                      [&](std::size_t i) { return !study.from_temporary[i]; });
  if (!study.retried.empty()) {
    out << "retried: " << study.retried.size()
        << " failed record(s) replaced by a later attempt's (kvaudit run --retry-failed)\n";
  }

  if (study.published.size() > 1) {
    out << "heterogeneity across published shards:\n";
    const auto& shards = study.published;
    print_if_mixed(out, "tool versions", shards, [](const auto& p) { return p.tool_version; });
    print_if_mixed(out, "git commits", shards, [](const auto& p) {
      return p.git_commit + (p.git_dirty == "true" ? "+dirty" : "");
    });
    print_if_mixed(out, "build types", shards, [](const auto& p) { return p.build_type; });
    print_if_mixed(out, "compilers", shards, [](const auto& p) { return p.compiler; });
    print_if_mixed(out, "HDF5 versions", shards, [](const auto& p) { return p.hdf5_version; });
    print_if_mixed(out, "GPU names", shards, [](const auto& p) { return p.gpu_name; });
    print_if_mixed(out, "driver versions", shards, [](const auto& p) { return p.driver_version; });
    print_if_mixed(out, "CUDA runtimes", shards,
                   [](const auto& p) { return p.cuda_runtime_version; });
    print_if_mixed(out, "global seeds", shards,
                   [](const auto& p) { return std::to_string(p.global_seed); });
    std::set<std::string> hosts;
    for (const auto& shard : shards) hosts.insert(shard.provenance.hostname);
    out << "  hosts: " << hosts.size() << "\n";
  }
}

}  // namespace kvaudit::records
