// ShardWriter: create under .tmp with H5F_ACC_EXCL, append in flushed batches, publish with link().
#include "suite/records/shard_writer.h"

#include <array>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>

#include "base/errors.h"
#include "suite/common/atomic_file.h"
#include "suite/common/utc_time.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/record_schema.h"
#include "suite/records/shard_checksum.h"
#include "suite/records/shard_name.h"
#include "suite/records/utf8_text.h"

namespace kvaudit::records {
namespace {

constexpr hsize_t kChunkRecords = 256;
constexpr const char* kNRecordsAttribute = "n_records";
constexpr const char* kManifestCanonicalPath = "/provenance/manifest_canonical";

template <typename E>
void require_member(E value, const CellRecord& record, const char* field) {
  if (!is_enum_member(value)) {
    throw InternalError("cell " + std::to_string(record.cell_id) + ": " + field + " holds " +
                        std::to_string(static_cast<int>(value)) + ", not a member of " +
                        std::string(EnumTraits<E>::type_name));
  }
}

}  // namespace

ShardWriter::ShardWriter(ShardWriterOptions options) : options_(std::move(options)) {
  h5::quiet_errors();
  if (options_.flush_every == 0) throw InternalError("ShardWriter: flush_every must be at least 1");
  if (options_.launch_id.empty()) options_.launch_id = make_launch_id();
  const ShardNameParts parts =
      shard_name_parts_from_environment(options_.provenance.attempt, options_.launch_pid,
                                        options_.launch_id, options_.provenance.rank, options_.seq);
  options_.provenance.launch_id = parts.launch_id;
  const std::string name = shard_file_name(parts);
  final_path_ = options_.directory / name;
  temp_path_ = options_.directory / (name + ".tmp");
  temp_name_ = temp_path_.string();

  std::error_code ec;
  std::filesystem::create_directories(options_.directory, ec);
  if (ec) {
    throw InternalError("cannot create shard directory " + options_.directory.string() + ": " +
                        ec.message());
  }
  for (const auto& taken : {final_path_, checksum_path(final_path_)}) {
    if (std::filesystem::exists(taken)) {
      throw InputError(taken.string() + ": already exists; refusing to overwrite it");
    }
  }
  if (std::filesystem::exists(temp_path_)) {
    throw InputError(temp_name_ + ": already exists; refusing to overwrite it");
  }
  // H5F_ACC_EXCL fails if the name appeared since the check above; default property lists keep
  // the default (earliest) format bounds.
  file_ = h5::adopt<h5::Kind::file>(
      H5Fcreate(temp_name_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), h5::Blame::internal,
      temp_name_, "creating the shard (H5Fcreate with H5F_ACC_EXCL)");

  try {
    initialise_new_file();
  } catch (...) {
    // The file is ours (H5F_ACC_EXCL) and holds no records: remove it rather than leave a
    // half-initialised shard behind.
    dataset_.reset();
    memory_type_.reset();
    file_.reset();
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
    throw;
  }
  buffer_.reserve(options_.flush_every);
}

void ShardWriter::initialise_new_file() {
  const h5::Datatype file_type = make_record_file_type();
  memory_type_ = make_record_memory_type();
  const std::array<hsize_t, 1> dims{0};
  const std::array<hsize_t, 1> max_dims{H5S_UNLIMITED};
  const h5::Dataspace space =
      h5::adopt<h5::Kind::dataspace>(H5Screate_simple(1, dims.data(), max_dims.data()),
                                     h5::Blame::internal, temp_name_, "H5Screate_simple");
  const h5::PropertyList create_props = h5::adopt<h5::Kind::property_list>(
      H5Pcreate(H5P_DATASET_CREATE), h5::Blame::internal, temp_name_, "H5Pcreate");
  const std::array<hsize_t, 1> chunk{kChunkRecords};
  h5::check(H5Pset_chunk(create_props.get(), 1, chunk.data()), h5::Blame::internal, temp_name_,
            "H5Pset_chunk");
  h5::check(H5Pset_fletcher32(create_props.get()), h5::Blame::internal, temp_name_,
            "H5Pset_fletcher32");
  dataset_ = h5::adopt<h5::Kind::dataset>(
      H5Dcreate2(file_.get(), kRecordsDataset, file_type.get(), space.get(), H5P_DEFAULT,
                 create_props.get(), H5P_DEFAULT),
      h5::Blame::internal, temp_name_, "creating /records");

  options_.provenance.schema_version = static_cast<int>(kSchemaVersion);
  options_.provenance.t_open_utc = utc_now_iso8601();
  options_.provenance.t_close_utc.clear();
  write_provenance(file_.get(), options_.provenance, temp_name_);
  h5::write_uint64_attribute(file_.get(), kNRecordsAttribute, 0, temp_name_);
  if (!options_.manifest_canonical.empty()) {
    h5::write_string_dataset(file_.get(), kManifestCanonicalPath, options_.manifest_canonical,
                             temp_name_);
  }
  h5::check(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), h5::Blame::internal, temp_name_, "H5Fflush");
}

ShardWriter::~ShardWriter() {
  if (!file_.valid()) return;
  try {
    flush();
  } catch (const std::exception& e) {
    std::cerr << "kvaudit: warning: " << e.what() << "; " << buffer_.size()
              << " buffered records were not written\n";
  }
  close_file();
}

void ShardWriter::append(const CellRecord& record) {
  if (!file_.valid()) throw InternalError(temp_name_ + ": append after the shard was closed");
  require_member(record.status, record, "status");
  require_member(record.attention_backend, record, "attention_backend");
  require_member(record.protocol, record, "protocol");
  require_member(record.split, record, "split");
  require_member(record.budget_kind, record, "budget_kind");
  CellRecord& copy = buffer_.emplace_back(record);
  for (std::string* text : {&copy.model, &copy.benchmark, &copy.task, &copy.method, &copy.method_id,
                            &copy.params_digest, &copy.error, &copy.output}) {
    if (!is_valid_utf8_without_nul(*text)) {
      *text = make_valid_utf8(*text);
      ++n_repaired_strings_;
    }
  }
  if (buffer_.size() >= options_.flush_every) flush();
}

void ShardWriter::flush() {
  if (!file_.valid()) throw InternalError(temp_name_ + ": flush after the shard was closed");
  if (!buffer_.empty()) {
    std::vector<RecordPod> pods;
    pods.reserve(buffer_.size());
    for (const CellRecord& record : buffer_) pods.push_back(to_pod(record));

    const hsize_t start = n_flushed_;
    const std::array<hsize_t, 1> count{static_cast<hsize_t>(pods.size())};
    const std::array<hsize_t, 1> new_size{start + count[0]};
    h5::check(H5Dset_extent(dataset_.get(), new_size.data()), h5::Blame::internal, temp_name_,
              "extending /records");
    const h5::Dataspace file_space = h5::adopt<h5::Kind::dataspace>(
        H5Dget_space(dataset_.get()), h5::Blame::internal, temp_name_, "H5Dget_space");
    const std::array<hsize_t, 1> offset{start};
    h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, offset.data(), nullptr,
                                  count.data(), nullptr),
              h5::Blame::internal, temp_name_, "H5Sselect_hyperslab");
    const h5::Dataspace memory_space =
        h5::adopt<h5::Kind::dataspace>(H5Screate_simple(1, count.data(), nullptr),
                                       h5::Blame::internal, temp_name_, "H5Screate_simple");
    h5::check(H5Dwrite(dataset_.get(), memory_type_.get(), memory_space.get(), file_space.get(),
                       H5P_DEFAULT, pods.data()),
              h5::Blame::internal, temp_name_, "writing records to /records");
    h5::write_uint64_attribute(file_.get(), kNRecordsAttribute, new_size[0], temp_name_);
    n_flushed_ = new_size[0];
    buffer_.clear();
  }
  h5::check(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), h5::Blame::internal, temp_name_, "H5Fflush");
}

std::filesystem::path ShardWriter::close_and_publish() {
  if (!file_.valid()) throw InternalError(temp_name_ + ": close_and_publish on a closed shard");
  flush();
  h5::write_string_attribute(file_.get(), "t_close_utc", utc_now_iso8601(), temp_name_);
  dataset_.reset();
  memory_type_.reset();
  if (file_.close() < 0) h5::throw_error(h5::Blame::internal, temp_name_, "H5Fclose");
  fsync_path(temp_path_);
  write_shard_checksum(temp_path_, final_path_);  // the sidecar exists before the shard does
  publish_file(temp_path_, final_path_);  // fsyncs the file, link()s, unlinks, fsyncs the directory
  return final_path_;
}

void ShardWriter::close_file() {
  dataset_.reset();
  memory_type_.reset();
  if (file_.close() < 0) {
    std::cerr << "kvaudit: warning: closing " << temp_name_
              << " failed: " << h5::innermost_error_message() << "\n";
  }
}

}  // namespace kvaudit::records
