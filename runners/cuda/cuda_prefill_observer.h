// CudaPrefillObserver: the GPU twin of cpu::PrefillObserver (runners/cpu/prefill_observer.h), the
// hook through which capture kernels see a layer's tensors during CudaModel::prefill.
//
// on_layer is called once per decoder layer, after the layer's keys and values are appended to the
// cache (lengths advanced) and before its attention runs, on the model's stream; the device
// pointers are valid only during the call (the observer launches its kernels on `stream` and copies
// what it keeps). Token-major layout like HF's projections: row t holds every head of token t.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "runners/cuda/device_sequence_kv.h"

namespace kvaudit::cuda {

struct CudaPrefillLayerView {
  int layer = 0;
  int num_tokens = 0;  // T rows in this prefill call (one sequence)
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  std::int32_t first_position = 0;                  // positions are first_position .. +T-1
  const std::int32_t* positions = nullptr;          // [T] (device)
  const __nv_bfloat16* queries_pre_rope = nullptr;  // [T, H, d]; null unless requested
  const __nv_bfloat16* queries = nullptr;           // [T, H, d] post-RoPE
  DeviceSequenceKv sequence;                        // the cache, this layer's rows already appended
  std::span<const std::int32_t> kv_lengths;  // host copy of lengths[layer, ·] after the append
  float scale = 0.0f;                        // attention scaling (head_dim^-0.5)
};

class CudaPrefillObserver {
 public:
  virtual ~CudaPrefillObserver() = default;
  virtual bool wants_pre_rope_queries() const { return false; }
  virtual void on_layer(const CudaPrefillLayerView& view, cudaStream_t stream) = 0;
};

}  // namespace kvaudit::cuda
