// Shared setup of the CUDA capture tests: ONE CPU prefill of the tiny bf16 golden Llama (200 LCG
// tokens) whose every layer is fed both to the CPU cpu::CpuPrefillCapture and — uploaded into a
// device cache and query buffers — to the CudaPrefillCapture, so both captures see identical Q/K/V;
// and the eager probability matrices of both backends (CPU kernels vs capture kernels).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/cpu/prefill_observer.h"
#include "runners/cuda/capture/cuda_prefill_capture.h"
#include "runners/cuda/device_buffer.h"
#include "runners/model/model_weights.h"
#include "runners/cpu/cpu_prefill_capture.h"

namespace kvaudit::cuda::test {

inline constexpr int kTokens = 200;
inline constexpr int kLc = 150;
inline constexpr int kLq = 200;
inline constexpr int kWindow = 16;

// `count` token ids in [3, vocab) from a 64-bit LCG (Knuth's MMIX constants).
std::vector<std::int32_t> lcg_tokens(int count, int vocab, std::uint64_t seed);

// Forwards each layer view to a CPU capture, uploads the same Q (pre- and post-RoPE) / K / V into
// a device cache (slot j = position j) and calls the CUDA capture's on_layer on the default stream.
class DualCaptureObserver : public cpu::PrefillObserver {
 public:
  DualCaptureObserver(const model::ModelConfig& config, int capacity,
                      cpu::CpuPrefillCapture& cpu_capture, CudaPrefillCapture& gpu_capture);
  bool wants_pre_rope_queries() const override { return true; }
  void on_layer(const cpu::PrefillLayerView& view) override;

  std::vector<std::vector<float>> queries;  // [layer][T, H, d] post-RoPE
  std::vector<std::vector<float>> keys;     // [layer][T, Hkv, d]

 private:
  model::ModelConfig config_;
  int capacity_;
  cpu::CpuPrefillCapture& cpu_capture_;
  CudaPrefillCapture& gpu_capture_;
  DeviceBuffer<bf16> cache_keys_, cache_values_;
  DeviceBuffer<std::int32_t> cache_positions_, cache_lengths_;
};

struct TinyPrefill {
  model::ModelWeights weights;
  std::unique_ptr<cpu::CpuModel> model;
  std::unique_ptr<cpu::SequenceState> state;
  std::unique_ptr<cpu::CpuPrefillCapture> cpu_capture;
  std::unique_ptr<CudaPrefillCapture> gpu_capture;
  std::unique_ptr<DualCaptureObserver> observer;
};

// Built on first use (needs a GPU), then shared by every test of the binary.
const TinyPrefill& tiny_prefill();

// Eager probabilities p(i, j) for rows i < rows, [H, rows, rows] (0 above the diagonal), from
// queries [T, H, d] and keys [T, Hkv, d]:
//   cpu: the CPU capture's kernels (key panels, cpu::score_tile, cpu::eager_probabilities);
//   gpu: eager_row_statistics + eager_probability_matrix (capture_kernels.h).
std::vector<float> cpu_probability_matrix(std::span<const float> queries,
                                          std::span<const float> keys, int heads, int kv_heads,
                                          int dim, int rows, bool bf16_mode);
std::vector<float> gpu_probability_matrix(std::span<const float> queries,
                                          std::span<const float> keys, int heads, int kv_heads,
                                          int dim, int rows, bool bf16_mode);

// Compares column sums [H, b] of the two captures and prints the agreement. Where a column's p's
// agree bit for bit the sums must agree to 1e-5 relative (identical fp64 order: expected exact);
// everywhere, GPU − CPU must equal Σ_i (p_gpu − p_cpu) to 1e-5 relative; at most 0.1% of the p's
// may differ, each by at most one bf16 ulp. p matrices [H, rows, rows], rows ≥ b.
void expect_column_sums_match(std::span<const float> gpu, std::span<const float> cpu,
                              const std::vector<float>& p_gpu, const std::vector<float>& p_cpu,
                              int heads, int rows, int boundary, const std::string& label);

}  // namespace kvaudit::cuda::test
