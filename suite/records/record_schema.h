// The HDF5 form of CellRecord: the compound memory and file types of `/records`, the POD mirror
// struct that HDF5 reads and writes, and the schema check applied to files we did not write.
//
// File type: explicit little-endian members, packed (no padding on disk), member order as in
// RecordPod. Memory type: RecordPod's layout (HOFFSET). Strings are variable-length UTF-8
// (H5T_C_S1, H5T_VARIABLE, H5T_CSET_UTF8); enums are HDF5 enums on int8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "suite/records/cell_record.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/schema_version.h"

namespace kvaudit::records {

// Name of the record dataset at the file root.
inline constexpr const char* kRecordsDataset = "records";

// CellRecord as HDF5 sees it in memory. String members point into a CellRecord (writing) or into
// memory HDF5 allocated (reading: release with H5Dvlen_reclaim).
struct RecordPod {
  std::uint64_t cell_id;
  std::uint64_t unit_id;
  std::int32_t attempt;
  std::int32_t rank;
  std::int8_t status;
  const char* model;
  const char* benchmark;
  const char* task;
  const char* method;
  const char* method_id;
  const char* params_digest;
  std::int8_t attention_backend;
  std::int8_t protocol;
  std::int8_t split;
  std::int8_t budget_kind;
  double compression;
  double retention;
  double threshold;
  std::uint32_t instance;
  std::uint32_t nominal_length;
  std::uint32_t n_prompt_tokens;
  std::uint32_t n_context_tokens;
  std::uint32_t n_question_tokens;
  std::uint32_t n_generated_tokens;
  std::uint64_t kept_tokens;
  std::uint64_t kept_bytes;
  std::uint64_t full_bytes;
  double realised_retention;
  double score;
  std::int64_t t_start_ns;
  std::int64_t t_end_ns;
  double prefill_ms;
  double decode_ms;
  const char* error;
  const char* output;
  std::uint64_t prompt_digest;  // schema version 4 on (content_digests.h)
  std::uint64_t kept_digest;    // schema version 4 on
  double cell_prefill_ms;       // schema version 5 on: the cell's costs (cell_record.h)
  double cell_capture_ms;
  double cell_extra_pass_ms;
  double cell_select_ms;
  double cell_evict_ms;
  double cell_feed_ms;
  double cell_decode_ms;
  std::uint64_t peak_kv_bytes;
  std::uint32_t shared_costs;
  std::int8_t device;
  std::int32_t threads;
  std::uint32_t question;  // schema version 6 on: reuse (cell_record.h)
  std::uint32_t n_questions;
  std::uint64_t final_kv_bytes;  // schema version 6 on: decode-time compression
  std::uint32_t decode_compressions;
  std::uint64_t record_digest;  // schema version 3 on (record_digest.h)
};

// The buffer a read starts from: members a file of an older schema lacks keep these values, which
// from_pod turns into "unknown" (0, or NaN for the cost times; device unknown; question 0 of 1).
RecordPod unread_record_pod();

// What a member of the compound holds.
enum class FieldType {
  u32,
  u64,
  i32,
  i64,
  f64,
  text,  // variable-length UTF-8 string
  cell_status,
  attention_backend,
  protocol,
  split,
  budget_kind,
  compute_device,
};

struct FieldSpec {
  const char* name;
  FieldType type;
  std::size_t offset;              // offset in RecordPod
  const char* v1_name = nullptr;   // its name in schema version 1, if it differs
  std::int64_t since_version = 1;  // the first schema version that has the member
};

// The members of the record compound, in file order (of the newest schema; a member whose
// since_version is above a file's version is absent from that file).
std::span<const FieldSpec> record_fields();
// Whether files of schema `version` have `field`.
bool field_present(const FieldSpec& field, std::int64_t version);
// `field`'s member name in files of schema `version`.
const char* field_name(const FieldSpec& field, std::int64_t version);

// Compound types for H5Dcreate (file, kSchemaVersion) and H5Dread/H5Dwrite (memory; member names
// of schema `version`, so a version-1 shard reads into the same RecordPod).
h5::Datatype make_record_file_type();
h5::Datatype make_record_memory_type(std::int64_t version = kSchemaVersion);

// A view of `record` for H5Dwrite: the string members point into `record`, which must outlive it.
// record_digest is computed from `record` (record_digest.h).
RecordPod to_pod(const CellRecord& record);
// A copy of what H5Dread produced; null string pointers (never written) become "". The stored
// record_digest is not part of CellRecord: readers compare pod.record_digest with
// record_digest(from_pod(pod)).
CellRecord from_pod(const RecordPod& pod);

// Checks a compound file type read from a shard of schema `version` against record_fields():
// every member present (by that version's names), with the expected class (and size, sign, string
// kind or enum members). Returns "" if the type fits, else a description of the first mismatch,
// e.g. "member 'score' is a string, expected a 64-bit float".
std::string describe_schema_mismatch(hid_t file_type, std::int64_t version = kSchemaVersion);

}  // namespace kvaudit::records
