// The record digest: a 64-bit checksum of one record's content, stored with the record (member
// `record_digest`, schema version 3) and checked by every reader, so a record whose bytes changed
// after it was written (a flipped bit in a number, a damaged string in HDF5's global heap) is
// refused or dropped instead of read.
//
// digest = the first 8 bytes, read big-endian, of SHA-256 over the record serialised as follows
// (docs/RECORDS.md §Integrity gives the same recipe for readers outside kvaudit):
//   for every /records member in file order except record_digest itself:
//     u32/u64/i32/i64   its value, little-endian, at its width
//     f64               its IEEE-754 bits, little-endian (NaN payloads as stored)
//     enum              its stored int8 value, one byte
//     string            its UTF-8 byte length as u64 little-endian, then the bytes
#pragma once

#include <cstdint>
#include <string>

#include "suite/records/cell_record.h"
#include "suite/records/schema_version.h"

namespace kvaudit::records {

// The serialisation above for a record of schema `version` (exposed for tests and for the
// documentation's worked example): the members a file of that version has (prompt_digest and
// kept_digest from version 4 on; the cost members, cell_prefill_ms … threads, from version 5 on;
// question, n_questions, final_kv_bytes and decode_compressions from version 6 on).
std::string record_digest_message(const CellRecord& record, std::int64_t version = kSchemaVersion);

std::uint64_t record_digest(const CellRecord& record, std::int64_t version = kSchemaVersion);

}  // namespace kvaudit::records
