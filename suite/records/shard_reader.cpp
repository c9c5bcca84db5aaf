// Reading and validating shards, and merging a study directory into records unique by cell_id.
#include "suite/records/shard_reader.h"

#include <algorithm>
#include <array>
#include <system_error>
#include <unordered_map>

#include "base/errors.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/record_schema.h"
#include "suite/records/shard_name.h"

namespace kvaudit::records {
namespace {

constexpr hsize_t kReadBatch = 4096;

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

std::vector<CellRecord> read_rows(hid_t dataset, hsize_t n_rows, std::int64_t version,
                                  const std::string& name) {
  const h5::Datatype memory_type = make_record_memory_type(version);
  const h5::Dataspace file_space = h5::adopt<h5::Kind::dataspace>(
      H5Dget_space(dataset), h5::Blame::input, name, "reading the dataspace of /records");
  std::vector<CellRecord> records;
  records.reserve(static_cast<std::size_t>(n_rows));
  std::vector<RecordPod> buffer;
  for (hsize_t start = 0; start < n_rows; start += kReadBatch) {
    const std::array<hsize_t, 1> count{std::min(kReadBatch, n_rows - start)};
    const std::array<hsize_t, 1> offset{start};
    h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr,
                                  count.data(), nullptr),
              h5::Blame::input, name, "selecting rows of /records");
    const h5::Dataspace memory_space = h5::adopt<h5::Kind::dataspace>(
        H5Screate_simple(1, count.data(), nullptr), h5::Blame::internal, name, "H5Screate_simple");
    buffer.assign(static_cast<std::size_t>(count[0]), RecordPod{});
    const VlenReclaimer reclaim(memory_type.get(), memory_space.get(), buffer);
    h5::check(H5Dread(dataset, memory_type.get(), memory_space.get(), file_space.get(), H5P_DEFAULT,
                      buffer.data()),
              h5::Blame::input, name, "reading /records");
    for (const RecordPod& pod : buffer) records.push_back(from_pod(pod));
  }
  return records;
}

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
    } else {
      listing.ignored.push_back(entry.path());
    }
  }
  const auto by_name = [](const std::filesystem::path& a, const std::filesystem::path& b) {
    return a.filename().string() < b.filename().string();
  };
  std::sort(listing.published.begin(), listing.published.end(), by_name);
  std::sort(listing.temporary.begin(), listing.temporary.end(), by_name);
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
  contents.records = read_rows(dataset.get(), to_read, version, name);
  return contents;
}

StudyRecords read_study(const std::filesystem::path& directory, const StudyReadOptions& options) {
  const ShardListing listing = list_shards(directory);
  StudyRecords study;
  study.ignored = listing.ignored;
  study.manifest_sha256 = options.expected_manifest_sha256;
  // cell_id -> the shard that holds its kept record
  std::unordered_map<std::uint64_t, std::filesystem::path> owner;
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

  for (const auto& file : listing.published) {
    ShardContents shard = read_shard(file, ShardReadMode::published);
    check_manifest(shard);
    PublishedShardInfo info{file, shard.provenance, shard.records.size(), 0};
    for (CellRecord& record : shard.records) {
      const auto [it, inserted] = owner.try_emplace(record.cell_id, file);
      if (!inserted) {
        study.duplicates.push_back({record.cell_id, it->second, file});
        ++info.n_duplicates;
        continue;
      }
      study.records.push_back(std::move(record));
    }
    study.published.push_back(std::move(info));
  }
  study.n_from_published = study.records.size();

  for (const auto& file : listing.temporary) {
    TempShardInfo info;
    info.file = file;
    if (!options.salvage) {
      study.warnings.push_back(file.string() +
                               ": unpublished temporary shard skipped (its cells will be redone)");
      study.temporary.push_back(std::move(info));
      continue;
    }
    ShardContents shard;
    try {
      shard = read_shard(file, ShardReadMode::salvage);
    } catch (const InputError& e) {
      info.outcome = TempShardOutcome::unreadable;
      info.message = e.what();
      study.warnings.push_back(
          info.message + " (unpublished temporary shard, unreadable: its cells will be redone)");
      study.temporary.push_back(std::move(info));
      continue;
    }
    check_manifest(shard);
    info.outcome = TempShardOutcome::salvaged;
    info.n_flushed = shard.records.size();
    for (CellRecord& record : shard.records) {
      if (!owner.try_emplace(record.cell_id, file).second) {
        ++info.n_already_present;
        continue;
      }
      study.records.push_back(std::move(record));
      ++info.n_added;
    }
    study.warnings.push_back(file.string() + ": salvaged " + std::to_string(info.n_added) +
                             " records from an unpublished temporary shard (" +
                             std::to_string(info.n_flushed) + " flushed, " +
                             std::to_string(info.n_already_present) + " already present)");
    study.temporary.push_back(std::move(info));
  }
  return study;
}

}  // namespace kvaudit::records
