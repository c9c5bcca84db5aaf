// The content digests of a record (schema version 4): what a cell answered and what it kept, so two
// runs (two machines, devices, versions, or kvaudit and another pipeline) can be compared below the
// score. Both are the first 8 bytes, read big-endian, of SHA-256 over a little-endian message
// (docs/RECORDS.md §Content digests gives the same recipes for readers outside kvaudit):
//
//   prompt_digest  over the prompt's token ids in order — context (chat-template head + context),
//                  then question, then suffix (template tail + answer prefix) — each id as i32.
//                  The context / question / suffix split is the record's n_context_tokens and
//                  n_question_tokens (the suffix is the rest of n_prompt_tokens): equal digests and
//                  equal counts mean the same ids split the same way.
//   kept_digest    over the cache the answer was decoded from, right after eviction: u32 number of
//                  layers, u32 number of KV heads, then per layer (in order) and per KV head (in
//                  order) the u32 count of kept positions followed by the positions as u32,
//                  strictly ascending. Positions are the original token positions 0..b−1 of the
//                  protocol's boundary b (query-agnostic: the context end; query-aware: the
//                  question end). A full-KV cell kept every position 0..b−1 of every head.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvaudit::records {

// kept[layer][kv_head] = positions kept (methods::Selection::kept).
using KeptPositions = std::vector<std::vector<std::vector<std::int32_t>>>;

// The messages (exposed for tests and the documentation's worked example).
std::string prompt_digest_message(std::span<const std::int32_t> context,
                                  std::span<const std::int32_t> question,
                                  std::span<const std::int32_t> suffix);
std::string kept_digest_message(const KeptPositions& kept);

std::uint64_t prompt_digest(std::span<const std::int32_t> context,
                            std::span<const std::int32_t> question,
                            std::span<const std::int32_t> suffix);
// Throws std::invalid_argument when the heads of the layers differ in number, or a position is
// negative or not strictly ascending within its head.
std::uint64_t kept_digest(const KeptPositions& kept);
// The digest of a full-KV cache: every position 0..boundary−1 of `heads` KV heads in `layers`
// layers (equal to kept_digest of that selection, computed without building it).
std::uint64_t full_kept_digest(int layers, int heads, int boundary);

}  // namespace kvaudit::records
