// ShardWriter: appends CellRecords to one rank's HDF5 shard and publishes it on a clean close.
//
// Protocol (docs/RECORDS.md): the shard is created as <name>.tmp with H5F_ACC_EXCL (nothing is
// ever truncated) and default format bounds (a crashed file opens without h5clear); provenance and
// n_records = 0 are written and flushed at once. /records is chunked with the fletcher32 filter
// and every row carries its record_digest. append() buffers in memory; every `flush_every`
// records flush() extends `/records`, writes the batch with one hyperslab H5Dwrite, updates
// n_records and calls H5Fflush, so between flushes the file on disk is not touched and a SIGKILL
// loses only the unflushed tail. close_and_publish() flushes, sets t_close_utc, closes, fsyncs,
// writes the SHA-256 sidecar (shard_checksum.h) and publishes with link() (refusing to replace an
// existing file), then fsyncs the directory. A writer destroyed without close_and_publish()
// flushes and closes but keeps the .tmp name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "suite/records/cell_record.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/provenance.h"

namespace kvaudit::records {

struct ShardWriterOptions {
  std::filesystem::path directory;  // created if missing
  // Caller-filled provenance (see fill_process_provenance); `rank` also names the file.
  // t_open_utc and t_close_utc are set by the writer.
  ShardProvenance provenance;
  std::int64_t launch_pid = 0;  // rank 0's pid, identical on all ranks of one launch
  // rank 0's random launch id (make_launch_id), identical on all ranks of one launch; the writer
  // draws one when it is empty. With provenance.attempt it keeps names unique when pids repeat.
  std::string launch_id;
  std::uint32_t seq = 0;        // rotation counter: a new shard of the same rank gets seq + 1
  std::size_t flush_every = 256;
  // The canonical manifest JSON; stored in /provenance/manifest_canonical when non-empty.
  std::string manifest_canonical;
};

class ShardWriter {
 public:
  // Creates <directory>/<name>.tmp. Throws InputError if the temporary or the final name already
  // exists (touching neither), InternalError if HDF5 or the file system fails.
  explicit ShardWriter(ShardWriterOptions options);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ShardWriter(ShardWriter&&) = delete;
  ShardWriter& operator=(ShardWriter&&) = delete;

  // Buffers a copy of `record`; flushes when flush_every records are buffered. Strings that are
  // not valid UTF-8 or contain NUL are repaired (see utf8_text.h). Throws InternalError if an enum
  // member is out of range or the writer is closed.
  void append(const CellRecord& record);
  // Writes the buffered records and H5Fflush-es the file.
  void flush();
  // Flushes, records t_close_utc, closes, fsyncs and publishes; returns the published path.
  // Throws InputError (the .tmp is left in place) if the final name exists.
  std::filesystem::path close_and_publish();

  const std::filesystem::path& temp_path() const { return temp_path_; }
  const std::filesystem::path& final_path() const { return final_path_; }
  std::uint64_t n_flushed() const { return n_flushed_; }  // records on disk
  std::size_t n_buffered() const { return buffer_.size(); }
  std::uint64_t n_repaired_strings() const { return n_repaired_strings_; }
  bool is_open() const { return file_.valid(); }

 private:
  // Creates /records, writes the provenance and n_records = 0, and flushes.
  void initialise_new_file();
  void close_file();

  ShardWriterOptions options_;
  std::filesystem::path temp_path_;
  std::filesystem::path final_path_;
  std::string temp_name_;  // temp_path_ as text, for messages
  h5::File file_;
  h5::Dataset dataset_;
  h5::Datatype memory_type_;
  std::vector<CellRecord> buffer_;
  std::uint64_t n_flushed_ = 0;
  std::uint64_t n_repaired_strings_ = 0;
};

}  // namespace kvaudit::records
