// Per-head top-k on the GPU: the kept positions of each KV head's n_kept highest scores, in
// ascending position order — the GPU counterpart of methods::per_head_top_k (scorer_method.h).
//
// Ranking: a score ranks before another iff methods::ranks_before (top_k.h) says so — higher
// first, NaN above every number, and TIES TO THE LOWER POSITION. The CPU selection of the kvpress
// parity methods reproduces torch's CPU topk instead, whose tie order is not "lowest index first"
// (top_k.h), so kept sets can differ from the CPU's only among exactly tied scores at the cut.
//
// Method: each position j counts the positions that rank before it (O(L²) per head, tiled through
// shared memory; exact and order-free) and is kept iff that rank is < n_kept, so every head keeps
// exactly n_kept; a block-wide prefix sum then writes the kept positions in ascending order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace kvaudit::cuda {

// scores [Hkv, L] (device f32) → kept [Hkv, n_kept] (device int32), positions ascending per head.
// Requires Hkv ≥ 1, L ≥ 1, 0 ≤ n_kept ≤ L (std::invalid_argument otherwise). Launches on
// `stream` and returns at once.
void select_top_k_on_gpu(const float* scores, int num_kv_heads, int length, std::int64_t n_kept,
                         std::int32_t* kept, cudaStream_t stream);

// The same, returned to the host as kept[kv_head] (synchronizes `stream`).
std::vector<std::vector<std::int32_t>> select_top_k_on_gpu(const float* scores, int num_kv_heads,
                                                           int length, std::int64_t n_kept,
                                                           cudaStream_t stream);

}  // namespace kvaudit::cuda
