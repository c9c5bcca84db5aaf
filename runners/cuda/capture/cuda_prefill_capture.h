// CudaPrefillCapture: the CUDA backend's unit::PrefillCapture (runners/unit/prefill_capture.h),
// the twin of cpu::CpuPrefillCapture. It observes one CudaModel prefill (CudaPrefillObserver) and
// captures, per layer and boundary b (CaptureOptions: Lc, Lq), what eviction methods read:
//   window queries  the last w = min(W, b) post-RoPE query rows before b, [H, w, d] f32
//   column sums     Σ_{i<b} A_h(i, j), A = HF eager attention with its bf16 rounding points, rows
//                   added in fp64 in increasing i, stored f32, [H, b] (capture_kernels.h states
//                   where a p can differ from the CPU capture's by one bf16 ulp)
//   query moments   Σ q [H, d] and Σ q qᵀ [H, d, d] of the pre-RoPE rows [r0, b), fp64
//   all queries     not captured: CaptureOptions::all_queries is refused by the constructor (the
//                   methods that read every query row run on the CPU engine)
//   attention input not captured: CaptureOptions::attention_input is refused likewise (fastkvzip)
//   keys / values   f32 copies of positions 0..max(b)−1 of every KV head, on the device and on the
//                   host (downloaded during on_layer: the cache may be evicted afterwards)
// Everything captured stays on the device (device_layer(): DeviceLayerCapture for the GPU scorers)
// and is also downloaded to the host, so layers() returns methods::LayerCapture views exactly like
// the CPU capture's and every CPU method can run on GPU-captured data. device_selection() is the
// fan-out's fast path: for a method with a GPU scorer (gpu_scorers.h, chosen by the method's typed
// parameters) the scores are computed on the device, once per (method, boundary) and shared by
// the cells that differ only in the budget, and the per-head top-k runs there too (gpu_top_k.h).
//
// on_layer runs its kernels on the model's stream and synchronizes it before returning (the
// downloads). Memory per layer: device and host each hold 2·Hkv·max(b)·d f32 (K, V) plus, per
// boundary, H·w·d + H·b f32 and H·d + H·d² f64; transient H·max(b)·2 f32 for the row statistics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "methods/layer_capture.h"
#include "runners/cuda/capture/device_layer_capture.h"
#include "runners/cuda/cuda_prefill_observer.h"
#include "runners/cuda/device_buffer.h"
#include "runners/model/model_weights.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::cuda {

class CudaPrefillCapture : public unit::PrefillCapture, public CudaPrefillObserver {
 public:
  // As unit::PrefillCapture: boundaries sorted and de-duplicated, each ≥ 1 (at most
  // kMaxCaptureBoundaries = 8), W ≥ 0, r0 ≥ 0; `config`'s dtype decides the bf16 rounding.
  // Throws std::invalid_argument naming the option that is wrong.
  CudaPrefillCapture(const model::ModelConfig& config, unit::CaptureOptions options);

  const unit::CaptureOptions& options() const override { return options_; }
  bool wants_pre_rope_queries() const override { return options_.query_moments; }

  // One layer of one fresh prefill (first position 0, layers in order, T ≥ max boundary, slot j
  // of every KV head holding position j for j < max boundary). Throws std::invalid_argument
  // naming the field otherwise; CudaError on a CUDA failure.
  void on_layer(const CudaPrefillLayerView& view, cudaStream_t stream) override;

  bool complete() const override;

  // Host views for boundary b, one per layer, with the same fields as
  // unit::PrefillCapture::layers(): keys/values/window queries/column sums/moments point into
  // this capture, o_proj into `weights`, rope_inv_freq to the given span. Valid while all three
  // live unchanged. Throws std::invalid_argument for an unknown boundary, an incomplete capture or
  // weights of another shape.
  std::vector<methods::LayerCapture> layers(int boundary, const model::ModelWeights& weights,
                                            std::span<const float> rope_inv_freq) const;
  // unit::PrefillCapture: the same views (the capture holds its own K/V copies, so the prefilled
  // cache is not read).
  std::vector<methods::LayerCapture> layers(int boundary, const unit::SequenceCache& prefilled,
                                            const model::ModelWeights& weights,
                                            std::span<const float> rope_inv_freq) const override;

  // The GPU scorer + per-head top-k of `method` at `boundary` (nullopt when the method has no GPU
  // scorer); kept counts are methods::kept_count(b, budget.compression), ties to the lower
  // position (gpu_top_k.h). Runs on the stream the prefill ran on.
  std::optional<methods::Selection> device_selection(const methods::Method& method, int boundary,
                                                     const methods::Budget& budget) override;

  // The device data of (layer, boundary b), valid while this capture lives.
  DeviceLayerCapture device_layer(int layer, int boundary) const;

 private:
  struct BoundaryData {
    int window_rows = 0;
    DeviceBuffer<float> window_queries;  // [H, w, d]
    DeviceBuffer<float> column_sums;     // [H, b]
    std::int64_t query_count = 0;
    DeviceBuffer<double> query_sum;    // [H, d]
    DeviceBuffer<double> query_outer;  // [H, d, d]
    std::vector<float> host_window_queries;
    std::vector<float> host_column_sums;
    std::vector<double> host_query_sum;
    std::vector<double> host_query_outer;
  };
  struct LayerData {
    DeviceBuffer<float> keys;    // [Hkv, kv_rows, d]
    DeviceBuffer<float> values;  // [Hkv, kv_rows, d]
    std::vector<float> host_keys;
    std::vector<float> host_values;
    std::vector<BoundaryData> boundaries;
  };

  void check_view(const CudaPrefillLayerView& view, cudaStream_t stream) const;
  std::size_t boundary_index(int boundary) const;

  model::ModelConfig config_;
  unit::CaptureOptions options_;
  int kv_rows_ = 0;  // max boundary
  std::vector<LayerData> layers_;
  cudaStream_t stream_ = nullptr;     // the prefill's stream (from on_layer)
  std::vector<float> rope_inv_freq_;  // the model's, for expected_attention
  // GPU scores [layers, Hkv, b] per (method, boundary), shared by cells differing in the budget.
  std::map<std::pair<const methods::Method*, int>, DeviceBuffer<float>> scores_;
};

}  // namespace kvaudit::cuda
