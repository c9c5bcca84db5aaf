// CAM: Cache Merging during decoding — CaM (Zhang et al., "CaM: Cache Merging for Memory-efficient
// LLMs Inference", ICML 2024, https://openreview.net/forum?id=LCTmppB165) as kvpress 0.5.5 builds
// it on DecodingPress (kvpress/presses/cam_press.py CAMPress): before the entries a decode-time
// compression evicts are dropped, some of their value vectors are folded into the kept entries
// that follow them.
//
// Restated from kvpress (one sequence; per layer; h = KV head; entries are indices j of the layer's
// cache in position order, the same index in every head):
//   Running attention sums A[h][j]: after every decode step, α = the step's attention row over
//   every cached key (the new key included): scores q·k_j / √d with q the step's pre-RoPE query
//   rotated at the step's position (the model's rounding of the rotation), softmax in f32, then
//   cast to the model dtype; averaged over the query heads of each KV group (f32 sum, ÷ group size,
//   model dtype). A is α at the first decode step; later A ← A (zero-padded to the cache's length)
//   + α, in the model dtype. A restarts with every prefill and is gathered by the kept indices
//   after a compression. Trigger (per layer; differs from DecodingPress): with c = decode steps
//   since the layer's last compression, n = the layer's cache length after the step: compress when
//   (c ≥ compression_interval and n > target_size) or target_size ≤ 1. When c reaches the interval
//   while n ≤ target_size nothing happens and c keeps counting (the buffer is not cleared either).
//   After a compression c = 0 and the buffer is cleared.
//   Compression (n_evict = n − target_size > 0; otherwise the cache is left as it is):
//     s[h][j] = the base scorer's scores at DecodingPress's bisected ratio (window queries as
//     DecodingPress builds them); m[j] = mean over h of s[h][j] (model dtype).
//     E = torch.topk(m, n_evict, largest=False) sorted ascending; K = torch.topk(m, target_size)
//     sorted ascending (two top-k calls: on a tie an index may be in both or in neither).
//     Candidates C: the c entries of E with the highest m, ties to the later index (kvpress flips E
//     and takes a stable descending argsort), then sorted ascending.
//     Window of candidate p: W_p = the merge_budget entries of K after p: K[t .. t+merge_budget)
//     with t = #{k ∈ K : k ≤ p} (searchsorted right), cut at K's end; b_p = |W_p|.
//     P[h][p] = clamp(A[h][p] / (Σ_{w∈W_p} A[h][w] / max(b_p, 1)), 0, 1), NaN → 0, +inf → 1 (model
//     dtype: the window sum, the mean and the ratio each rounded).
//     Bernoulli: M[h][p] = 1 with probability P[h][p].
//     Merge: v'[h][w] = v[h][w] + Σ_{p: w ∈ W_p, M[h][p] = 1} v[h][p] · (1/b_p) over the pre-merge
//     v; bf16 models: 1/b_p and each product rounded to bf16, the sum accumulated in f32 and
//     rounded once (torch's CPU scatter_add_ into a bf16 tensor accumulates in f32; checked against
//     torch 2.x). Then every head keeps the indices K (keys unchanged), and A keeps A[h][K].
// Randomness: kvpress draws M with torch.bernoulli from torch's global RNG, which no other program
// reproduces. Ours is Philox4x32-10 (Random123) keyed like methods/random.h by the study seed and
// the cell's selection key, one stream per (layer, compression event):
//   key = (seed low, seed high), counter = (decode step of the compression, 0x80000000 |
//   layer << 16 | block, cell_key low, cell_key high); block b gives draws 4b .. 4b+3 (its four
//   words); draw e = candidate_rank · Hkv + h; u = (word >> 8) · 2⁻²⁴; M = u < P.
//   Bit 31 keeps these counters apart from RandomScorer's and the leverage sketch's (layer < 2¹⁵).
// Parity with kvpress is shown with a deterministic rule injected on both sides (MergeDrawRule;
// the golden patches torch.bernoulli with the same rule: tools/golden/kvpress_groups/cam.py).
// Deviations: dot products and sums in double / f32 in our order (torch's order differs by ulps,
// which matters only at an exact tie of m or at P exactly on a draw's edge).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runners/unit/inference_engine.h"

namespace kvaudit::unit {

// Test-only: decides each merge from its probability P (e.g. P ≥ 0.5, the golden's rule). An
// empty function draws from Philox (see the header comment).
using MergeDrawRule = std::function<bool(float probability)>;

// Draw e of the Philox stream of (layer, compression at decode_step) of a cell: u ∈ [0, 1) on a
// 2⁻²⁴ grid. Throws std::invalid_argument past the stream's 2¹⁸ draws or for layer ≥ 2¹⁵.
float cam_uniform(std::uint64_t seed, std::uint64_t cell_key, int layer, int decode_step,
                  std::int64_t e);

// The step's attention row of one layer averaged per KV group: [Hkv, n] row-major, n = the
// entries each head holds (all heads the same). queries_rotated: [H, d] the step's query after
// RoPE (the model's rounding). bf16: the model's rounding points (see the header comment).
std::vector<float> cam_step_attention(std::span<const float> queries_rotated,
                                      std::span<const CacheHeadEntries> heads, int num_heads,
                                      int head_dim, bool bf16);

// A ← A zero-padded to step's length + step ([Hkv, n] each, row-major); A empty = the first step.
void cam_accumulate(std::vector<float>& sums, std::span<const float> step, int num_kv_heads,
                    bool bf16);

struct CamMergeInput {
  std::span<const float> mean_scores;          // [n] m[j]
  std::span<const float> attention_sums;       // [Hkv, n] A
  std::vector<std::span<const float>> values;  // per KV head, [n, d] pre-merge
  int length = 0;
  int head_dim = 0;
  int target_size = 0;   // n > target_size
  int merge_budget = 0;  // ≥ 1
  int steps_since = 0;   // c: candidates taken
  bool bf16 = false;
};

struct CamMergeResult {
  std::vector<std::int32_t> kept;               // K, ascending indices
  std::vector<std::int32_t> candidates;         // C, ascending indices
  std::vector<int> window_start;                // per candidate: t (index into kept)
  std::vector<int> window_size;                 // per candidate: b_p
  std::vector<std::vector<float>> probability;  // [Hkv][candidate] P
  std::vector<std::vector<bool>> merged;        // [Hkv][candidate] M
  // New value rows of the kept entries that received a merge: index into the layer's cache before
  // the compression, KV head and the row (f32, already rounded to bf16 in bf16 mode).
  struct Row {
    int kv_head = 0;
    std::int32_t index = 0;
    std::vector<float> value;
  };
  std::vector<Row> replacements;  // by head, then ascending index
  int merges = 0;                 // Σ M over heads and candidates (passed draws)
};

// One CAM compression's selection and merge. draw(P, h, candidate rank) → M.
CamMergeResult cam_merge(const CamMergeInput& input,
                         const std::function<bool(float, int, int)>& draw);

}  // namespace kvaudit::unit
