// Element-wise and row-wise kernels of the CUDA decoder block, each the twin of a CPU backend
// function (named beside it) and computing exactly what that function computes in Rounding::bf16
// mode: fp32 arithmetic on bf16 inputs, bf16 round-to-nearest-even at the same points, no fused
// multiply-add where the CPU twin has none (this library is compiled with -fmad=false).
// All tensors are row-major device arrays; every function launches on `stream` and returns at once
// (errors of the launch throw CudaError; errors during execution surface at the next sync).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

// CPU twin: cpu::embed_tokens. table [vocab, hidden], tokens [rows] (ids already checked on the
// host) → out [rows, hidden].
void embed_tokens(const __nv_bfloat16* table, int hidden, const std::int32_t* tokens, int rows,
                  __nv_bfloat16* out, cudaStream_t stream);

// CPU twin: cpu::rms_norm: var = mean(x²) accumulated in fp64 and rounded once to f32, then
// y = [x·(1/sqrt(var + eps))], out = [w·y]. x, out [rows, hidden]; out may alias x.
void rms_norm(const __nv_bfloat16* x, const __nv_bfloat16* weight, int rows, int hidden, float eps,
              __nv_bfloat16* out, cudaStream_t stream);

// The fused QKV projection's output qkv [rows, (H + 2·Hkv)·d] (q | k | v per row) is split:
//   q_out [rows, H, d]        = RoPE(q)         (CPU twin: cpu::apply_rope)
//   q_pre_rope [rows, H, d]   = q before RoPE   (only when q_pre_rope != nullptr)
//   cache keys   of row r     = RoPE(k), cache values = v, positions = positions[r]
// RoPE reads cos/sin [max_position, d] (f32, already bf16-rounded; cpu::rope_cos_sin) at
// positions[r]. Row r belongs to sequence row_sequence[r] of `sequences` (a device array) and is
// its row_offset[r]-th new token: it goes to slot lengths[layer, h] + row_offset[r] of every KV
// head h. The lengths are NOT advanced here (see advance_lengths).
void rope_split_append(const __nv_bfloat16* qkv, int rows, int num_heads, int num_kv_heads,
                       int head_dim, const float* cos_table, const float* sin_table,
                       const std::int32_t* positions, const std::int32_t* row_sequence,
                       const std::int32_t* row_offset, const DeviceSequenceKv* sequences, int layer,
                       __nv_bfloat16* q_out, __nv_bfloat16* q_pre_rope, cudaStream_t stream);

// lengths[layer, h] += new_tokens[s] for every sequence s < num_sequences and KV head h.
void advance_lengths(const DeviceSequenceKv* sequences, int num_sequences, int layer,
                     const std::int32_t* new_tokens, cudaStream_t stream);

// CPU twin: cpu::silu_mul on the fused gate|up projection: gate_up [rows, 2·inter] (gate first),
// out [rows, inter] = [[silu(gate)]·up].
void silu_mul(const __nv_bfloat16* gate_up, int rows, int inter, __nv_bfloat16* out,
              cudaStream_t stream);

// CPU twin: cpu::residual_add. residual[i] = [residual[i] + delta[i]], count elements.
void residual_add(__nv_bfloat16* residual, const __nv_bfloat16* delta, std::size_t count,
                  cudaStream_t stream);

// out[j] = x[rows[j]] for j < count (rows of width `width`): picks the rows that need logits.
void gather_rows(const __nv_bfloat16* x, const std::int32_t* rows, int count, int width,
                 __nv_bfloat16* out, cudaStream_t stream);

// Batched decode attention: sequence b's query [H, d] (queries row b of [batch, H, d]) attends to
// every entry its cache holds at `layer` (the new token's key is already appended; every kept
// position is ≤ the query's). CPU twins: cpu::eager_attention_task / cpu::sdpa_attention_task on
// one row. GQA: head h reads KV head h / (H / Hkv). out [batch, H, d]. Reads the lengths from the
// device (usable inside a captured CUDA graph).
void decode_attention(const DeviceSequenceKv* sequences, int batch, int layer, int num_heads,
                      int num_kv_heads, int head_dim, float scale, AttentionNumerics numerics,
                      const __nv_bfloat16* queries, __nv_bfloat16* out, cudaStream_t stream);

}  // namespace kvaudit::cuda
