// Attention of one sequence and one layer over its ragged per-head KV cache: the problem type
// shared by the two CPU backends, and their entry points (attention_eager.cpp, attention_sdpa.cpp).
//
// Masking: query row t (original position query_positions[t]) attends to the entries of its KV head
// whose original position is ≤ query_positions[t]. The cache holds only kept entries (evicted ones
// are simply absent) and already contains this chunk's own keys, so this one rule gives causal
// attention within a prefill chunk and full attention over the kept past.
// GQA: query head h reads KV head h / (num_heads / num_kv_heads) (HF repeat_kv).
//
// Numerics (docs/design/numerics.md §eager, §sdpa; brackets = bf16 rounding in bf16 mode):
//   eager: s = [q·k] then [s·scale]; p = [softmax_fp32(s)] (exp(s − max) / Σ); out = [Σ p·v]
//   sdpa:  s = q·k in fp32, never rounded; online softmax over key blocks with running max m and
//          sum l (p = exp2(s·c − m·c), c = scale·log2 e; l sums the fp32 p); the value accumulator
//          uses [p]; out = [acc / l] at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runners/cpu/kv_cache.h"
#include "runners/cpu/numerics.h"

namespace kvaudit::cpu {

struct AttentionProblem {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;  // HF `scaling` = head_dim^-0.5
  Rounding rounding = Rounding::none;
  std::span<const float> queries;                 // [T, num_heads, head_dim], post-RoPE
  std::span<const std::int32_t> query_positions;  // [T], ascending
  std::span<const KvHeadView> kv_heads;           // [num_kv_heads], this layer of the cache

  std::size_t num_rows() const { return query_positions.size(); }
};

// A unit of work: the query heads of one KV head's GQA group, query rows [row_begin, row_end).
// The group's heads read the same keys (the cache's key panels, key_panels.h).
struct AttentionTask {
  int kv_head = 0;
  std::size_t row_begin = 0;
  std::size_t row_end = 0;
};

// Up to four (query row, head) pairs of one task whose queries are equally spaced in memory, scored
// together against the same keys: either several heads of one token (stride head_dim) or one head
// of several tokens (stride num_heads·head_dim).
struct AttentionTile {
  static constexpr std::size_t kMaxPairs = 4;
  std::size_t count = 0;
  std::size_t query_stride = 0;
  std::size_t row[kMaxPairs] = {};   // query row (token index in the problem)
  std::size_t head[kMaxPairs] = {};  // query head
  // index of the pair in the task, (row − row_begin)·group + (head − first head); equally spaced:
  // pair[i] = pair[0] + i·pair_stride
  std::size_t pair[kMaxPairs] = {};
  std::size_t pair_stride = 1;
};

// The tiles covering every (row, head) pair of a task: heads of one token when the group has ≥ 4
// heads or the task one row, else tokens of one head.
std::vector<AttentionTile> attention_tiles(const AttentionProblem& problem,
                                           const AttentionTask& task);

// Checks sizes and the GQA ratio; throws std::invalid_argument on a mismatch.
void validate_attention_problem(const AttentionProblem& problem, std::span<const float> out);

// Splits the problem into tasks of at most rows_per_task rows per KV head (rows_per_task ≥ 1).
std::vector<AttentionTask> split_attention_tasks(const AttentionProblem& problem,
                                                 std::size_t rows_per_task);

// One task of each backend. out is the problem's whole output [T, num_heads, head_dim]; a task
// writes only its own (rows, heads) slice, so tasks may run concurrently. scratch is reused
// storage.
void eager_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                          std::span<float> out, std::vector<float>& scratch);
void sdpa_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                         std::size_t key_block, std::span<float> out, std::vector<float>& scratch);
// sdpa with PyTorch's CPU flash-kernel numerics (attention_sdpa_torch_cpu.cpp): only for comparing
// with golden logits made by HF on a CPU. Assumes an uncompressed cache (kv length = past + rows).
void sdpa_torch_cpu_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                                   std::span<float> out);

// Whole problems, tasks spread over OpenMP threads. eager: query_chunk rows per task (the result
// does not depend on it); sdpa: key_block keys per online-softmax step (rounded up to whole key
// panels of kKeyPanel keys).
void attention_eager(const AttentionProblem& problem, std::size_t query_chunk,
                     std::span<float> out);
void attention_sdpa(const AttentionProblem& problem, std::size_t key_block, std::span<float> out);

}  // namespace kvaudit::cpu
