// Comparing two records of one cell (duplicates across shards): which content fields differ.
//
// Content = every field except who, where and when computed it: attempt, rank, t_start_ns,
// t_end_ns, prefill_ms, decode_ms and the schema-5 costs (the cell_*_ms times, shared_costs,
// device, threads; peak_kv_bytes is content, compared where both records have it). Two records of a
// cell that differ in content cannot both be the cell's result, so a study holding both is refused
// (shard_reader.h); records that differ only in who/when (a cell recomputed identically) are a
// note.
#pragma once

#include <string>
#include <vector>

#include "suite/records/cell_record.h"

namespace kvaudit::records {

// Names of the content fields that differ (NaN equals NaN), in schema order; empty if none.
// prompt_digest, kept_digest and peak_kv_bytes count only where both records have them (non-zero).
std::vector<std::string> differing_content_fields(const CellRecord& a, const CellRecord& b);

// A failed outcome that `kvaudit run --retry-failed` may replace: oom or error.
bool is_retryable_status(CellStatus status);

}  // namespace kvaudit::records
