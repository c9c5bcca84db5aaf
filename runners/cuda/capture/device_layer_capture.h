// DeviceLayerCapture: the device-side twin of methods::LayerCapture (methods/layer_capture.h) for
// one layer and one boundary b = length, as CudaPrefillCapture keeps it; the GPU scorers
// (gpu_scorers.h) read it. Plain data holding device pointers owned by the capture (valid while
// the capture lives). Everything is f32 (fp64 for the moments) with the same values the host
// LayerCapture of the same capture holds, so a CPU method and its GPU scorer see identical inputs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvaudit::cuda {

struct DeviceLayerCapture {
  int layer = 0;
  int num_layers = 0;
  int num_heads = 0;     // H
  int num_kv_heads = 0;  // Hkv; query head h reads KV head h / (H / Hkv)
  int head_dim = 0;      // d
  int length = 0;        // L = b: candidates are positions 0..L-1
  bool model_is_bf16 = false;

  // Keys (post-RoPE) and values of positions 0..L-1: KV head g, position j at
  // keys + (g·kv_rows + j)·d. kv_rows ≥ L (the capture keeps max boundary rows per head).
  const float* keys = nullptr;
  const float* values = nullptr;
  int kv_rows = 0;

  // [H, window_rows, d]: the last window_rows post-RoPE queries before L (null when 0 rows).
  int window_rows = 0;
  const float* window_queries = nullptr;

  // [H, L] eager column sums (null unless captured).
  const float* column_sums = nullptr;

  // Pre-RoPE query moments over rows moments_first_row..L-1 (null unless captured):
  // query_sum [H, d], query_outer [H, d, d] (fp64).
  int moments_first_row = 4;
  std::int64_t query_count = 0;
  const double* query_sum = nullptr;
  const double* query_outer = nullptr;

  int group_size() const { return num_heads / num_kv_heads; }
};

}  // namespace kvaudit::cuda
