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
// This build writes kSchemaVersion and reads every version from kOldestReadableSchemaVersion on
// (a version-1 shard's `backend` member is read as attention_backend; records of versions before 4
// read with both digests 0 = unknown); anything else is refused with an error naming the file and
// both versions.
#pragma once

#include <cstdint>

namespace kvaudit::records {

inline constexpr std::int64_t kSchemaVersion = 4;
inline constexpr std::int64_t kOldestReadableSchemaVersion = 1;

}  // namespace kvaudit::records
