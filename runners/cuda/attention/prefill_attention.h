// Prefill attention of one sequence's new rows over its ragged per-head cache on the GPU, both
// backends. CPU twins: cpu::attention_eager / cpu::attention_sdpa (runners/cpu/attention.h), whose
// masking and numerics these kernels reproduce:
//   masking  query row t (original position query_positions[t]) attends to the entries of its KV
//            head whose original position is ≤ query_positions[t]; the rows' own keys are already
//            in the cache (kernels.h rope_split_append + advance_lengths), so this one rule gives
//            causal attention within the chunk and full attention over the kept past.
//   GQA      query head h reads KV head h / (H / Hkv).
//   sdpa     FlashAttention-2 on tensor cores (bf16 mma, fp32 accumulation): s = q·k in fp32, never
//            rounded; online softmax over key blocks (p = exp2(s·c − m·c), c = scale·log2 e; l sums
//            the fp32 p); P rounded to bf16 before P·V; out = [acc / l].
//   eager    HF eager, materialized: per query-row chunk and KV head, S = [Q·Kᵀ] (cuBLAS, bf16
//            out), [S·scale], masked, p = [softmax_fp32], out = [P·V] (cuBLAS, bf16 out). Chunks
//            keep S within the workspace, so 32K contexts fit; results do not depend on the chunk.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "runners/cuda/device_buffer.h"
#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

struct PrefillAttentionProblem {
  DeviceSequenceKv sequence;  // the sequence's cache (device pointers)
  int layer = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // a multiple of 16, at most 256
  float scale = 0.0f;
  int rows = 0;                                   // T new rows of this sequence
  const __nv_bfloat16* queries = nullptr;         // [T, H, d] post-RoPE (device)
  const std::int32_t* query_positions = nullptr;  // [T] ascending (device)
  // Host copy of lengths[layer, ·] (entries per KV head after the append), [Hkv]: sizes the launch.
  std::span<const std::int32_t> kv_lengths;
  // Host copy of the first and last query position (the rows are consecutive new tokens).
  std::int32_t first_query_position = 0;
  std::int32_t last_query_position = 0;
  __nv_bfloat16* out = nullptr;  // [T, H, d]
};

// FlashAttention-2 forward (tensor cores). Throws std::invalid_argument for an unsupported
// head_dim or inconsistent sizes.
void prefill_attention_sdpa(const PrefillAttentionProblem& problem, cudaStream_t stream);

// Scratch for the eager path: scores of one chunk, [group, chunk_rows, keys] bf16.
class EagerWorkspace {
 public:
  // `bytes` bounds the score buffer; chunk rows are chosen so one chunk's scores fit.
  explicit EagerWorkspace(std::size_t bytes);
  std::size_t bytes() const { return scores_.bytes(); }
  __nv_bfloat16* scores() { return scores_.data(); }

 private:
  DeviceBuffer<__nv_bfloat16> scores_;
};

// HF eager, materialized in chunks (cuBLAS on `handle`, which must be bound to `stream`).
void prefill_attention_eager(const PrefillAttentionProblem& problem, EagerWorkspace& workspace,
                             cublasHandle_t handle, cudaStream_t stream);

}  // namespace kvaudit::cuda
