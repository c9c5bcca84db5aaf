// Capture kernels: the GPU twins of cpu::CpuPrefillCapture's per-layer work
// (runners/cpu/cpu_prefill_capture.cpp), for one decoder layer of one fresh prefill.
//
//   copy_kv_prefix        keys/values of slots 0..rows-1 of every KV head → f32 [Hkv, rows, d]
//   gather_window_queries the last w post-RoPE query rows before b → f32 [H, w, d]
//   eager_row_statistics  per query row i < rows: max_j s(i, j) and Σ_j e(i, j) over j ≤ i
//   eager_column_sums     column_sums_b[h, j] = Σ_{i<b} p(i, j) for every boundary b at once
//   eager_probability_matrix  p(i, j) itself (tests compare it with cpu::eager_probabilities)
//   query_moments         Σ q and Σ q qᵀ over pre-RoPE rows [r0, b) for every boundary b
//
// Numerics (eager_softmax_device.cuh): s = [[q·k]·scale], e = vector_exp(s − max), p = [e / Σ e]
// exactly as the CPU kernels compute them, except that the row's Σ e is accumulated in fp64 and
// rounded once to f32 (the CPU sums in f32 in its vector order); a p can therefore differ from the
// CPU's by one bf16 ulp when the two f32 sums differ and e/Σ lands next to a rounding boundary.
// Column sums add p(i, j) in fp64 in increasing i, one thread per column (the CPU's order), so
// they are bit-identical to the CPU's wherever the p's are. Moments multiply and add in fp64 in
// increasing row order (the CPU's order; -fmad=false), so they are bit-identical.
//
// Layouts: queries [T, H, d] bf16 token-major (CudaPrefillLayerView); keys [Hkv, key_rows, d] f32
// (the output of copy_kv_prefix); query head h reads KV head h / (H / Hkv). Every function checks
// its sizes (std::invalid_argument), launches on `stream` and returns at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

// Boundaries one column-sum or moment kernel serves at once (a unit has Lc and Lq).
inline constexpr int kMaxCaptureBoundaries = 8;

// The attention problem of one layer as the capture kernels see it.
struct EagerProblem {
  const __nv_bfloat16* queries = nullptr;  // [≥ rows, H, d]
  const float* keys = nullptr;             // [Hkv, key_rows, d]
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int key_rows = 0;  // rows per KV head in `keys` (≥ rows)
  int rows = 0;      // query rows i = 0..rows-1 (keys j ≤ i)
  float scale = 0.0f;
  bool bf16 = false;  // round at the eager rounding points
};

// Copies slots 0..rows-1 of each KV head of `layer` (bf16) into keys_out / values_out, f32
// [Hkv, rows, d]. Requires rows ≤ sequence.capacity.
void copy_kv_prefix(const DeviceSequenceKv& sequence, int layer, int rows, float* keys_out,
                    float* values_out, cudaStream_t stream);

// Positions of slots 0..rows-1 of each KV head of `layer` → positions_out [Hkv, rows] (int32),
// for the host to check that slot j holds position j.
void copy_position_prefix(const DeviceSequenceKv& sequence, int layer, int rows,
                          std::int32_t* positions_out, cudaStream_t stream);

// out[h, r, :] = queries[boundary − window + r, h, :] as f32, r < window; window ≤ boundary.
void gather_window_queries(const __nv_bfloat16* queries, int num_heads, int head_dim, int boundary,
                           int window, float* out, cudaStream_t stream);

// row_max / row_sum [H, rows] of the problem (see above).
void eager_row_statistics(const EagerProblem& problem, float* row_max, float* row_sum,
                          cudaStream_t stream);

// Column sums for up to kMaxCaptureBoundaries boundaries b_k (ascending, each ≤ problem.rows):
// outputs[k] is [H, b_k] f32. Reads the statistics of eager_row_statistics.
struct ColumnSumTargets {
  int count = 0;
  int boundaries[kMaxCaptureBoundaries] = {};
  float* outputs[kMaxCaptureBoundaries] = {};
};
void eager_column_sums(const EagerProblem& problem, const float* row_max, const float* row_sum,
                       const ColumnSumTargets& targets, cudaStream_t stream);

// p(i, j) into out [H, rows, rows] (0 for j > i), from the same statistics: a test hook.
void eager_probability_matrix(const EagerProblem& problem, const float* row_max,
                              const float* row_sum, float* out, cudaStream_t stream);

// Pre-RoPE query moments for up to kMaxCaptureBoundaries boundaries b_k (ascending): sums[k] is
// [H, d] and outers[k] [H, d, d] (full symmetric matrix), both fp64, over rows first_row..b_k−1
// (zero when b_k ≤ first_row).
struct MomentTargets {
  int count = 0;
  int boundaries[kMaxCaptureBoundaries] = {};
  double* sums[kMaxCaptureBoundaries] = {};
  double* outers[kMaxCaptureBoundaries] = {};
};
void query_moments(const __nv_bfloat16* queries_pre_rope, int num_heads, int head_dim,
                   int first_row, const MomentTargets& targets, cudaStream_t stream);

}  // namespace kvaudit::cuda
