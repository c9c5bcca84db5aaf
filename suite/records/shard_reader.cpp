// Reading and validating shards, and merging a study directory into records unique by
// (cell_id, question).
#include "suite/records/shard_reader.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "base/errors.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/isolated_read.h"
#include "suite/records/record_comparison.h"
#include "suite/records/record_digest.h"
#include "suite/records/record_schema.h"
#include "suite/records/shard_checksum.h"
#include "suite/records/shard_name.h"

namespace kvaudit::records {
namespace {

constexpr hsize_t kReadBatch = 4096;
constexpr hsize_t kSalvageBatch = 256;  // one chunk of /records (shard_writer.cpp)

// Frees the strings HDF5 allocated in a batch of RecordPods, also when conversion throws.
class VlenReclaimer {
 public:
  VlenReclaimer(hid_t type, hid_t space, std::vector<RecordPod>& buffer)
      : type_(type), space_(space), buffer_(buffer) {}
  VlenReclaimer(const VlenReclaimer&) = delete;
  VlenReclaimer& operator=(const VlenReclaimer&) = delete;
  ~VlenReclaimer() { H5Dvlen_reclaim(type_, space_, H5P_DEFAULT, buffer_.data()); }

 private:
  hid_t type_;
  hid_t space_;
  std::vector<RecordPod>& buffer_;
};

h5::File open_read_only(const std::string& name) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name, ec)) {
    throw InputError(name + ": " +
                     (std::filesystem::exists(name, ec) ? "not a regular file" : "no such file"));
  }
  const htri_t is_hdf5 = H5Fis_hdf5(name.c_str());
  if (is_hdf5 == 0) throw InputError(name + ": not an HDF5 file");
  return h5::adopt<h5::Kind::file>(H5Fopen(name.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                   h5::Blame::input, name, "opening as HDF5");
}

// Reads rows [0, n_rows) of /records into contents.records. From schema 3 on every row's
// record_digest is checked. Published mode: any failure throws. Salvage mode: batches of one
// chunk; a batch HDF5 cannot read and a row failing its digest are counted and left out.
void read_rows(hid_t dataset, hsize_t n_rows, std::int64_t version, const std::string& name,
               ShardReadMode mode, ShardContents& contents) {
  const bool salvage = mode == ShardReadMode::salvage;
  const bool has_digest = version >= 3;
  contents.digests_checked = has_digest;
  const h5::Datatype memory_type = make_record_memory_type(version);
  const h5::Dataspace file_space = h5::adopt<h5::Kind::dataspace>(
      H5Dget_space(dataset), h5::Blame::input, name, "reading the dataspace of /records");
  contents.records.reserve(static_cast<std::size_t>(std::min<hsize_t>(n_rows, 1u << 20)));
  std::vector<RecordPod> buffer;
  const hsize_t batch = salvage ? kSalvageBatch : kReadBatch;
  for (hsize_t start = 0; start < n_rows; start += batch) {
    const std::array<hsize_t, 1> count{std::min(batch, n_rows - start)};
    const std::array<hsize_t, 1> offset{start};
    h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr,
                                  count.data(), nullptr),
              h5::Blame::input, name, "selecting rows of /records");
    const h5::Dataspace memory_space = h5::adopt<h5::Kind::dataspace>(
        H5Screate_simple(1, count.data(), nullptr), h5::Blame::internal, name, "H5Screate_simple");
    buffer.assign(static_cast<std::size_t>(count[0]), unread_record_pod());
    const VlenReclaimer reclaim(memory_type.get(), memory_space.get(), buffer);
    if (H5Dread(dataset, memory_type.get(), memory_space.get(), file_space.get(), H5P_DEFAULT,
                buffer.data()) < 0) {
      if (!salvage) h5::throw_error(h5::Blame::input, name, "reading /records");
      H5Eclear2(H5E_DEFAULT);
      // A chunk failing its fletcher32 checksum: read it once more without the check and keep
      // the rows whose record digests still match (schema 3); older shards have no digests.
      bool reread = false;
      if (has_digest) {
        buffer.assign(static_cast<std::size_t>(count[0]), unread_record_pod());
        const h5::PropertyList no_edc = h5::adopt<h5::Kind::property_list>(
            H5Pcreate(H5P_DATASET_XFER), h5::Blame::internal, name, "H5Pcreate");
        reread = H5Pset_edc_check(no_edc.get(), H5Z_DISABLE_EDC) >= 0 &&
                 H5Dread(dataset, memory_type.get(), memory_space.get(), file_space.get(),
                         no_edc.get(), buffer.data()) >= 0;
        H5Eclear2(H5E_DEFAULT);
      }
      if (!reread) {
        contents.n_rows_unreadable += count[0];
        continue;
      }
    }
    for (std::size_t i = 0; i < buffer.size(); ++i) {
      CellRecord record = from_pod(buffer[i]);
      if (has_digest && record_digest(record, version) != buffer[i].record_digest) {
        if (!salvage) {
          throw InputError(name + ": record " + std::to_string(start + i) + " (cell " +
                           std::to_string(record.cell_id) +
                           ") does not match its record_digest: the record was damaged");
        }
        ++contents.n_bad_digest;
        continue;
      }
      contents.records.push_back(std::move(record));
    }
  }
}

std::string file_name_of(const std::filesystem::path& path) { return path.filename().string(); }

}  // namespace

std::string_view to_string(TempShardOutcome outcome) {
  switch (outcome) {
    case TempShardOutcome::skipped:
      return "skipped";
    case TempShardOutcome::salvaged:
      return "salvaged";
    case TempShardOutcome::unreadable:
      return "unreadable";
  }
  return "?";
}

std::string_view to_string(ShardVerification verification) {
  switch (verification) {
    case ShardVerification::checksum:
      return "checksum";
    case ShardVerification::legacy:
      return "legacy";
    case ShardVerification::salvaged:
      return "salvaged";
  }
  return "?";
}

ShardListing list_shards(const std::filesystem::path& directory) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) {
    throw InputError(directory.string() + ": not a directory");
  }
  ShardListing listing;
  std::filesystem::directory_iterator it(directory, ec);
  if (ec) throw InputError(directory.string() + ": cannot list: " + ec.message());
  for (const auto& entry : it) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (is_published_shard_name(name)) {
      listing.published.push_back(entry.path());
    } else if (is_temp_shard_name(name)) {
      listing.temporary.push_back(entry.path());
    } else if (is_checksum_file_name(name)) {
      listing.checksums.push_back(entry.path());
    } else {
      listing.ignored.push_back(entry.path());
    }
  }
  const auto by_name = [](const std::filesystem::path& a, const std::filesystem::path& b) {
    return a.filename().string() < b.filename().string();
  };
  std::sort(listing.published.begin(), listing.published.end(), by_name);
  std::sort(listing.temporary.begin(), listing.temporary.end(), by_name);
  std::sort(listing.checksums.begin(), listing.checksums.end(), by_name);
  std::sort(listing.ignored.begin(), listing.ignored.end(), by_name);
  return listing;
}

ShardContents read_shard(const std::filesystem::path& file, ShardReadMode mode) {
  h5::quiet_errors();
  const std::string name = file.string();
  const h5::File handle = open_read_only(name);

  ShardContents contents;
  contents.file = file;
  contents.provenance = read_provenance(handle.get(), name);
  contents.n_records_attribute = h5::read_uint64_attribute(handle.get(), "n_records", name);
  contents.manifest_canonical =
      h5::read_string_dataset(handle.get(), "/provenance/manifest_canonical", name);

  if (h5::check(H5Lexists(handle.get(), kRecordsDataset, H5P_DEFAULT), h5::Blame::input, name,
                "looking up /records") <= 0) {
    throw InputError(name + ": dataset /records is missing");
  }
  const h5::Dataset dataset =
      h5::adopt<h5::Kind::dataset>(H5Dopen2(handle.get(), kRecordsDataset, H5P_DEFAULT),
                                   h5::Blame::input, name, "opening /records");
  const h5::Datatype file_type = h5::adopt<h5::Kind::datatype>(
      H5Dget_type(dataset.get()), h5::Blame::input, name, "reading the type of /records");
  const std::int64_t version = contents.provenance.schema_version;
  if (const std::string problem = describe_schema_mismatch(file_type.get(), version);
      !problem.empty()) {
    throw InputError(name + ": " + problem);
  }
  const h5::Dataspace space = h5::adopt<h5::Kind::dataspace>(
      H5Dget_space(dataset.get()), h5::Blame::input, name, "reading the dataspace of /records");
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw InputError(name + ": /records is not one-dimensional");
  }
  hsize_t rows = 0;
  h5::check(H5Sget_simple_extent_dims(space.get(), &rows, nullptr), h5::Blame::input, name,
            "reading the length of /records");
  contents.n_rows = rows;

  hsize_t to_read = rows;
  if (mode == ShardReadMode::published) {
    if (contents.n_records_attribute != rows) {
      throw InputError(name + ": attribute n_records is " +
                       std::to_string(contents.n_records_attribute) + " but /records has " +
                       std::to_string(rows) + " rows");
    }
  } else {
    to_read = std::min<hsize_t>(rows, contents.n_records_attribute);
  }
  read_rows(dataset.get(), to_read, version, name, mode, contents);
  return contents;
}

namespace {

constexpr std::size_t kMaxListedConflicts = 20;

struct Conflict {
  std::uint64_t cell_id = 0;
  std::uint32_t question = 0;
  std::filesystem::path first_file;
  std::filesystem::path second_file;
  std::vector<std::string> fields;
};

// A record's key: its cell and, under the reuse protocol, its question (a reuse cell writes one
// record per question of its context; docs/RECORDS.md §Versions, schema 6).
struct RecordKey {
  std::uint64_t cell_id = 0;
  std::uint32_t question = 0;
  bool operator==(const RecordKey&) const = default;
};
struct RecordKeyHash {
  std::size_t operator()(const RecordKey& key) const {
    return std::hash<std::uint64_t>{}(key.cell_id ^
                                      (std::uint64_t{key.question} * 0x9E3779B97F4A7C15ULL));
  }
};

// Merges records into `study`, unique by (cell_id, question) (see read_study in shard_reader.h).
class StudyMerger {
 public:
  explicit StudyMerger(StudyRecords& study) : study_(study) {}

  enum class Added { added, identical, retried, kept_retry, conflict };

  Added add(CellRecord record, const std::filesystem::path& file, bool temporary) {
    const auto [it, inserted] =
        index_.try_emplace(RecordKey{record.cell_id, record.question}, study_.records.size());
    if (inserted) {
      owner_.push_back(file);
      study_.records.push_back(std::move(record));
      study_.from_temporary.push_back(temporary);
      if (!temporary) ++study_.n_from_published;
      return Added::added;
    }
    const std::size_t at = it->second;
    CellRecord& kept = study_.records[at];
    const std::vector<std::string> fields = differing_content_fields(kept, record);
    if (fields.empty()) {
      // A .tmp repeating a published record is what salvage expects (counted there instead).
      if (!temporary) {
        study_.duplicates.push_back({record.cell_id, owner_[at], file, record.question});
      }
      return Added::identical;
    }
    if (is_retryable_status(kept.status) && record.attempt > kept.attempt) {
      study_.retried.push_back({record.cell_id, owner_[at], file, kept.status, record.question});
      if (study_.from_temporary[at] != temporary) {
        if (temporary) {
          --study_.n_from_published;
        } else {
          ++study_.n_from_published;
        }
        study_.from_temporary[at] = temporary;
      }
      kept = std::move(record);
      owner_[at] = file;
      return Added::retried;
    }
    if (is_retryable_status(record.status) && kept.attempt > record.attempt) {
      study_.retried.push_back({record.cell_id, file, owner_[at], record.status, record.question});
      return Added::kept_retry;
    }
    conflicts_.push_back({record.cell_id, record.question, owner_[at], file, fields});
    return Added::conflict;
  }

  // InputError listing every conflict (up to kMaxListedConflicts) when there is one.
  void throw_if_conflicts() const {
    if (conflicts_.empty()) return;
    std::ostringstream out;
    out << conflicts_.size()
        << " cell(s) have records that disagree in more than one shard (a study may hold one "
           "result per cell; remove the shard that should not count, or move it to another "
           "directory):";
    for (std::size_t i = 0; i < conflicts_.size() && i < kMaxListedConflicts; ++i) {
      const Conflict& c = conflicts_[i];
      out << "\n  cell " << c.cell_id;
      if (c.question != 0) out << " question " << c.question;
      out << ": " << c.first_file.string() << " and " << c.second_file.string() << " differ in ";
      for (std::size_t f = 0; f < c.fields.size(); ++f) out << (f ? ", " : "") << c.fields[f];
    }
    if (conflicts_.size() > kMaxListedConflicts) {
      out << "\n  … and " << conflicts_.size() - kMaxListedConflicts << " more";
    }
    throw InputError(out.str());
  }

 private:
  StudyRecords& study_;
  std::unordered_map<RecordKey, std::size_t, RecordKeyHash> index_;  // -> index in study_.records
  std::vector<std::filesystem::path> owner_;                         // parallel to study_.records
  std::vector<Conflict> conflicts_;
};

const char* kSalvageHint =
    "; nothing was used from it. `--salvage-corrupt` keeps the records of a damaged shard whose "
    "record digests still match; or move the file out of the shard directory";

}  // namespace

ShardContents read_verified_shard(const std::filesystem::path& file,
                                  const StudyReadOptions& options, PublishedShardInfo& info) {
  const ChecksumCheck check = verify_shard_checksum(file);
  if (check.status == ChecksumStatus::verified) {
    info.verification = ShardVerification::checksum;
    return read_shard(file, ShardReadMode::published);
  }
  if (check.status == ChecksumStatus::missing) {
    // Schema 1 and 2 shards never had a sidecar; a newer one lost it.
    ShardContents shard;
    try {
      shard = read_shard_isolated(file, ShardReadMode::published, options.isolation_timeout);
    } catch (const InputError& e) {
      if (!options.salvage_corrupt) throw InputError(check.message + ", and " + e.what());
    }
    if (!shard.file.empty() && shard.provenance.schema_version < 3) {
      info.verification = ShardVerification::legacy;
      info.note = file.string() + ": schema version " +
                  std::to_string(shard.provenance.schema_version) +
                  ", written before shards had checksums: read unverified";
      return shard;
    }
    if (!options.salvage_corrupt) {
      throw InputError(check.message +
                       " (every shard of schema version 3 or later is published "
                       "with one)" +
                       kSalvageHint);
    }
  } else if (!options.salvage_corrupt) {
    throw InputError(check.message + kSalvageHint);
  }
  // salvage_corrupt: what can be proven intact, i.e. rows whose record_digest matches.
  info.verification = ShardVerification::salvaged;
  ShardContents shard;
  try {
    shard = read_shard_isolated(file, ShardReadMode::salvage, options.isolation_timeout);
  } catch (const InputError& e) {
    throw InputError(check.message + "; salvaging it failed too: " + e.what());
  }
  if (!shard.digests_checked) {
    info.n_dropped = shard.records.size();
    shard.records.clear();
  }
  info.n_dropped += shard.n_rows_unreadable + shard.n_bad_digest;
  info.note = check.message + "; salvaged " + std::to_string(shard.records.size()) +
              " record(s) whose digests match, " + std::to_string(info.n_dropped) + " left out";
  return shard;
}

StudyRecords read_study(const std::filesystem::path& directory, const StudyReadOptions& options) {
  const ShardListing listing = list_shards(directory);
  StudyRecords study;
  study.ignored = listing.ignored;
  study.manifest_sha256 = options.expected_manifest_sha256;
  StudyMerger merger(study);
  bool have_hash = !options.expected_manifest_sha256.empty();
  std::string hash_source = "the expected hash";  // where study.manifest_sha256 came from

  const auto check_manifest = [&](const ShardContents& shard) {
    const std::string& hash = shard.provenance.manifest_sha256;
    if (!have_hash) {
      have_hash = true;
      study.manifest_sha256 = hash;
      hash_source = "the hash of " + shard.file.string();
      return;
    }
    if (hash != study.manifest_sha256) {
      throw InputError(shard.file.string() + ": manifest_sha256 " + hash + " differs from " +
                       hash_source + " " + study.manifest_sha256);
    }
  };

  // Sidecars whose shard is absent: left by a crash between writing the sidecar and link().
  std::unordered_set<std::string> published_names;
  for (const auto& file : listing.published) published_names.insert(file_name_of(file));
  for (const auto& sidecar : listing.checksums) {
    const std::string name = file_name_of(sidecar);
    const std::string shard = name.substr(0, name.size() - std::string(".sha256").size());
    if (!published_names.contains(shard)) {
      study.warnings.push_back(sidecar.string() +
                               ": checksum file without its shard (a publish interrupted before "
                               "link(); the shard's records are in its .tmp, if anywhere)");
    }
  }

  // The .tmp files earlier launches republished (salvaged_from of published shards).
  std::unordered_map<std::string, std::filesystem::path> republished;

  for (const auto& file : listing.published) {
    PublishedShardInfo info;
    info.file = file;
    ShardContents shard = read_verified_shard(file, options, info);
    check_manifest(shard);
    info.provenance = shard.provenance;
    info.n_records = shard.records.size();
    if (!info.note.empty()) study.warnings.push_back(info.note);
    std::istringstream from(shard.provenance.salvaged_from);
    for (std::string line; std::getline(from, line);) {
      if (!line.empty()) republished.emplace(line, file);
    }
    for (CellRecord& record : shard.records) {
      const auto added = merger.add(std::move(record), file, false);
      if (added == StudyMerger::Added::identical || added == StudyMerger::Added::kept_retry) {
        ++info.n_duplicates;
      }
    }
    study.published.push_back(std::move(info));
  }
  merger.throw_if_conflicts();

  for (const auto& file : listing.temporary) {
    TempShardInfo info;
    info.file = file;
    if (const auto it = republished.find(file_name_of(file)); it != republished.end()) {
      info.republished_in = it->second;
    }
    if (!options.salvage) {
      if (info.republished_in.empty()) {
        study.warnings.push_back(
            file.string() +
            ": unpublished temporary shard, not read (only `kvaudit run` salvages it; cells it "
            "holds that no published shard has count as not done)");
      }
      study.temporary.push_back(std::move(info));
      continue;
    }
    ShardContents shard;
    try {
      shard = read_shard_isolated(file, ShardReadMode::salvage, options.isolation_timeout);
    } catch (const InputError& e) {
      info.outcome = TempShardOutcome::unreadable;
      info.message = e.what();
      study.warnings.push_back(info.message +
                               " (unpublished temporary shard, unreadable: its cells that no "
                               "published shard holds will be run again)");
      study.temporary.push_back(std::move(info));
      continue;
    }
    check_manifest(shard);
    info.outcome = TempShardOutcome::salvaged;
    info.n_flushed = shard.records.size();
    info.n_dropped = shard.n_rows_unreadable + shard.n_bad_digest;
    for (CellRecord& record : shard.records) {
      switch (merger.add(std::move(record), file, true)) {
        case StudyMerger::Added::added:
        case StudyMerger::Added::retried:
          ++info.n_added;
          break;
        default:
          ++info.n_already_present;
          break;
      }
    }
    if (info.n_added > 0 || info.n_dropped > 0 || info.republished_in.empty()) {
      study.warnings.push_back(
          file.string() + ": salvaged " + std::to_string(info.n_added) +
          " records from an unpublished temporary shard (" + std::to_string(info.n_flushed) +
          " flushed and intact, " + std::to_string(info.n_already_present) + " already present" +
          (info.n_dropped > 0 ? ", " + std::to_string(info.n_dropped) + " damaged, left out" : "") +
          ")");
    }
    study.temporary.push_back(std::move(info));
  }
  merger.throw_if_conflicts();
  return study;
}

}  // namespace kvaudit::records
