// The shard schema version: the layout of /records and the root attribute set, stored as the root
// attribute schema_version of every shard (docs/RECORDS.md §Versions).
//   1  the first layout
//   2  the record member `backend` is called `attention_backend` (same enum, same stored values)
//   3  integrity: the record member `record_digest` (record_digest.h), the fletcher32 filter on
//      /records, a SHA-256 sidecar file per published shard (shard_checksum.h), shard names with
//      the attempt and a random launch id, the root attribute `salvaged_from`
//   4  auditability: the record members `prompt_digest` and `kept_digest` (content_digests.h),
//      and the random method keyed without the attention backend (methods/random.h): a version-4
//      random cell keeps the same positions under sdpa and eager, a version-3 one did not
//   5  costs: the record members cell_prefill_ms, cell_capture_ms, cell_extra_pass_ms,
//      cell_select_ms, cell_evict_ms, cell_feed_ms, cell_decode_ms (the cell's own or apportioned
//      times), peak_kv_bytes, shared_costs (which times are shares), device and threads
//   6  reuse and decode-time compression: the Protocol enum member `reuse` (stored 2), the record
//      members question, n_questions (a reuse cell writes one record per question), final_kv_bytes
//      and decode_compressions, and the shared_costs bits kSharedSelect and kSharedEvict
// This build writes kSchemaVersion and reads every version from kOldestReadableSchemaVersion on
// (a version-1 shard's `backend` member is read as attention_backend; records of versions before 4
// read with both digests 0 = unknown, of versions before 5 with the cost times NaN, peak_kv_bytes,
// shared_costs and threads 0 and device unknown, of versions before 6 as question 0 of 1 with
// final_kv_bytes 0 and decode_compressions 0); anything else is refused with an error naming the
// file and both versions.
#pragma once

#include <cstdint>

namespace kvaudit::records {

inline constexpr std::int64_t kSchemaVersion = 6;
inline constexpr std::int64_t kOldestReadableSchemaVersion = 1;

}  // namespace kvaudit::records
