// The shard schema version: the layout of /records and the root attribute set, stored as the root
// attribute schema_version of every shard (docs/RECORDS.md §Versions).
//   1  the first layout
//   2  the record member `backend` is called `attention_backend` (same enum, same stored values)
//   3  integrity: the record member `record_digest` (record_digest.h), the fletcher32 filter on
//      /records, a SHA-256 sidecar file per published shard (shard_checksum.h), shard names with
//      the attempt and a random launch id, the root attribute `salvaged_from`
// This build writes kSchemaVersion and reads every version from kOldestReadableSchemaVersion on
// (a version-1 shard's `backend` member is read as attention_backend); anything else is refused
// with an error naming the file and both versions.
#pragma once

#include <cstdint>

namespace kvaudit::records {

inline constexpr std::int64_t kSchemaVersion = 3;
inline constexpr std::int64_t kOldestReadableSchemaVersion = 1;

}  // namespace kvaudit::records
