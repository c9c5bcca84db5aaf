// CudaModel: the CUDA backend's forward pass for Llama / Qwen2 / Mistral decoders, bf16 on the
// GPU, the twin of cpu::CpuModel (runners/cpu/cpu_model.h) running cast_to_bf16(weights): same
// decoder block, same rounding points (docs/design/numerics.md), same masking, both attention
// backends, ragged per-head caches with the CPU KvCache's position rules. It is the CUDA
// backend's unit::InferenceEngine (runners/unit/inference_engine.h): the one fan-out
// (unit::run_unit) drives it; its capture is a CudaPrefillCapture with the GPU scorers as
// device fast paths.
//
// Per forward call (R rows = the new tokens of every sequence, stacked):
//   embed → per layer: rms_norm → fused QKV GEMM (+bias) → RoPE, split, append K/V to each
//   sequence's DeviceKvCache → [observer] → attention per sequence (sdpa: FlashAttention-2 kernel;
//   eager: materialized chunks through cuBLAS; one new row per sequence: the batched decode
//   kernel) → o_proj GEMM → residual → rms_norm → fused gate|up GEMM → SiLU·up → down GEMM →
//   residual; then final norm and lm_head on the rows that need logits.
// GEMMs: cuBLASLt, bf16 in, fp32 accumulation, bf16 out (gemm.h). Kernels: kernels/, attention/.
// decode_step replays a CUDA graph per batch composition (captured on its second use; the first
// runs eagerly), so a decode step costs one launch plus the token/position upload.
//
// One CudaModel per GPU and per thread: it owns a stream, a cuBLAS handle and grow-only working
// buffers, so calls on one model must not overlap. Logits come back as f32 copies of bf16 values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/attention_backend.h"
#include "base/logit_matrix.h"
#include "runners/cuda/attention/prefill_attention.h"
#include "runners/cuda/cuda_prefill_observer.h"
#include "runners/cuda/decode_graph_key.h"
#include "runners/cuda/device_kv_cache.h"
#include "runners/cuda/device_weights.h"
#include "runners/cuda/gemm.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::cuda {

struct CudaModelOptions {
  // Bound on the eager backend's materialized scores per chunk (prefill_attention.h).
  std::size_t eager_workspace_bytes = std::size_t{512} << 20;
  std::size_t gemm_workspace_bytes = std::size_t{64} << 20;
  // Replay decode steps from CUDA graphs (off: every step launches its kernels).
  bool cuda_graphs = true;
};

class CudaModel final : public unit::InferenceEngine {
 public:
  // Uploads the weights (rounded to bf16) to the current device. `weights` must outlive the model
  // only when it is used as an engine of the fan-out (built_from() compares the object).
  CudaModel(const model::ModelWeights& weights, AttentionBackend backend,
            CudaModelOptions options = {});
  // Takes weights already on the device (benchmarks with random weights); built_from() is then
  // false for every host weights object.
  CudaModel(DeviceWeights weights, AttentionBackend backend, CudaModelOptions options = {});
  ~CudaModel() override;
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  const model::ModelConfig& config() const override { return weights_.config; }
  AttentionBackend attention_backend() const override { return backend_; }
  Device device() const override { return Device::cuda; }
  bool built_from(const model::ModelWeights& weights) const override {
    return &weights == host_weights_;
  }
  const DeviceWeights& weights() const { return weights_; }
  // The cuBLASLt configuration pinned per GEMM shape so far (gemm.h), one line each.
  std::vector<std::string> gemm_plans() const { return gemm_->plan_descriptions(); }
  cudaStream_t stream() const { return stream_; }
  std::span<const float> rope_inv_freq() const override { return inv_freq_; }

  // An empty sequence holding at most `capacity` entries per (layer, KV head).
  DeviceKvCache new_sequence(int capacity) const;

  // As cpu::CpuModel::prefill: `tokens` continue the sequence (positions from its original
  // length). The observer (optional) sees every layer (cuda_prefill_observer.h).
  LogitMatrix prefill(DeviceKvCache& sequence, std::span<const std::int32_t> tokens, LogitRows rows,
                      CudaPrefillObserver* observer = nullptr);
  std::vector<LogitMatrix> prefill_batch(std::span<DeviceKvCache* const> sequences,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows);
  // One token per sequence; logits [batch, vocab].
  LogitMatrix decode_step(std::span<DeviceKvCache* const> batch,
                          std::span<const std::int32_t> tokens);

  // unit::InferenceEngine: the calls above on DeviceKvCaches (a cache of another engine is
  // refused with std::invalid_argument). new_capture makes a CudaPrefillCapture on this model's
  // stream. max_concurrent_cells plans the unit's memory first (memory_planner.h) and throws
  // unit::EngineCapacityError ("GPU memory: ...") when not even its prefill fits.
  std::unique_ptr<unit::SequenceCache> new_cache(std::int64_t capacity) override;
  std::unique_ptr<unit::PrefillCapture> new_capture(unit::CaptureOptions options) override;
  LogitMatrix prefill(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                      LogitRows rows, unit::PrefillCapture* capture = nullptr) override;
  std::vector<LogitMatrix> prefill_batch(std::span<unit::SequenceCache* const> caches,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows) override;
  LogitMatrix decode_step(std::span<unit::SequenceCache* const> caches,
                          std::span<const std::int32_t> tokens) override;
  int max_concurrent_cells(const unit::UnitDemand& demand) override;
  // One stream: the fan-out forks and compacts caches one after another.
  bool concurrent_cache_ops() const override { return false; }

  // Waits for the model's stream.
  void synchronize() const;

 private:
  struct Workspace;
  struct DecodeGraph;

  void initialise();
  void ensure_rope_table(std::int64_t positions);
  void ensure_workspace(std::size_t rows);
  // The layers, on the rows already embedded into the workspace; logits for `logit_rows`.
  void run_layers(Workspace& ws, std::span<DeviceKvCache* const> sequences,
                  std::span<const std::size_t> first_row, std::size_t total_rows,
                  const DeviceSequenceKv* device_sequences,
                  std::span<const std::int32_t> host_positions, bool single_row_per_sequence,
                  CudaPrefillObserver* observer);
  // Final norm and lm_head on ws.logit_row_index's first `logit_rows` rows → ws.logits.
  void run_logits(Workspace& ws, int logit_rows);
  std::vector<LogitMatrix> forward(std::span<DeviceKvCache* const> sequences,
                                   std::span<const std::span<const std::int32_t>> tokens,
                                   LogitRows rows, CudaPrefillObserver* observer);
  // After a throw inside a forward: the sequences' device lengths back to their host mirrors.
  void restore_lengths(std::span<DeviceKvCache* const> sequences) noexcept;
  void validate(std::span<DeviceKvCache* const> sequences,
                std::span<const std::span<const std::int32_t>> tokens) const;

  DeviceWeights weights_;
  const model::ModelWeights* host_weights_ = nullptr;  // what the weights were uploaded from
  AttentionBackend backend_;
  CudaModelOptions options_;
  std::vector<float> inv_freq_;
  float scale_ = 0.0f;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<EagerWorkspace> eager_workspace_;
  std::int64_t rope_positions_ = 0;
  DeviceBuffer<float> rope_cos_;  // [rope_positions_, d]
  DeviceBuffer<float> rope_sin_;
  std::unique_ptr<Workspace> workspace_;
  std::map<DecodeGraphKey, std::unique_ptr<DecodeGraph>> decode_graphs_;
};

}  // namespace kvaudit::cuda
