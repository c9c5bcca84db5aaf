// Host-side validation of a PrefillAttentionProblem, shared by the sdpa and eager backends: every
// size, pointer and alignment the kernels rely on is checked before anything is launched, and a
// violation throws std::invalid_argument naming the backend, the field and what is wrong.
#pragma once

#include <cstdint>

#include "runners/cuda/attention/prefill_attention.h"

namespace kvaudit::cuda {

// `backend` names the caller in messages ("prefill_attention_sdpa", ...). Checks:
//   heads ≥ 1, kv heads ≥ 1 dividing heads; head_dim a multiple of 16 in [16, 256]; the sequence
//   descriptor agrees (num_kv_heads, head_dim, capacity ≥ 1, non-null pointers); layer ≥ 0;
//   scale finite and > 0; rows ≥ 1; queries, out, keys and values 16-byte aligned;
//   kv_lengths has one entry per KV head, each in [rows, capacity] (the rows' own keys are in
//   the cache); first_query_position ≥ 0 and last − first + 1 = rows (consecutive new tokens).
void validate_prefill_attention(const PrefillAttentionProblem& problem, const char* backend);

// Entries of a KV head visible to the query at original position `query_position`, from the host
// copies alone: the rows are the head's last `rows` entries at positions first..last, so every
// earlier entry is older than first and n = kv_length − (last − query_position).
std::int64_t visible_entries(const PrefillAttentionProblem& problem, int kv_head,
                             std::int32_t query_position);

}  // namespace kvaudit::cuda
