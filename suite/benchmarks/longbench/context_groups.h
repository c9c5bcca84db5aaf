// LongBench records (or instances) grouped by their shared context, for the reuse protocol
// (issue 19; docs/design/reuse.md §Data): every question on one context is answered from one
// compression of that context. kvpress's evaluation does the same (kvpress 0.4.1
// evaluation/evaluate.py: rows grouped by exact equality of "context", one pipeline call per group
// with the group's questions; the answer prefix must be the same within a group).
//
// Groups are in order of first appearance and their members in input order, so the grouping is a
// pure function of the file. Whether a task has shared contexts is a property of its data file:
// the bundled sample files (tests/golden/longbench/data) have none (every group is a singleton);
// in the official LongBench v1 files, tasks built from QA sets with several questions per document
// (e.g. qasper, narrativeqa, multifieldqa) may repeat a context — the grouping finds them whatever
// the task, and a task without repeats gives singleton groups (the reuse protocol then equals the
// per-question one).
#pragma once

#include <cstddef>
#include <vector>

#include "suite/benchmarks/longbench/longbench_instance.h"
#include "suite/benchmarks/longbench/longbench_jsonl.h"

namespace kvaudit::benchmarks {

struct LongBenchContextGroup {
  std::vector<std::size_t> members;  // indices into the input, ascending; members[0] first
};

// Records whose `context` strings are identical, byte for byte.
std::vector<LongBenchContextGroup> group_records_by_context(
    const std::vector<LongBenchRecord>& records);

// Instances whose kvpress split context (after middle truncation, chat template applied or not
// alike) is identical: what one compression can serve. Two questions on one document whose prompts
// were middle-truncated differently land in different groups (the truncation keeps the question,
// so its length moves the cut). InputError when a group mixes answer prefixes or chat-template
// choices (one compression has one prompt prefix), naming the task and the two _ids.
std::vector<LongBenchContextGroup> group_instances_by_context(
    const std::vector<LongBenchInstance>& instances);

}  // namespace kvaudit::benchmarks
