// CpuPrefillCapture: the CPU backend's unit::PrefillCapture (runners/unit/prefill_capture.h says
// what is captured). It observes one CpuModel prefill (cpu::PrefillObserver) and keeps, per layer
// and boundary, the window queries, the eager attention column sums, the pre-RoPE query moments
// and, when asked (all_queries), copies of every query row (pre- and post-RoPE) and pre-RoPE key
// before the boundary. Keys and values are not copied: layers() returns spans over the first b
// entries of each KV head of the prefilled SequenceState's cache.
//
// Column sums reuse the CPU backend's eager kernels (attention_math.h: score_tile,
// eager_probabilities), so A is bit for bit the matrix attention_eager.cpp computes; each query
// head is one task (its rows summed in increasing order into fp64), so the result does not depend
// on the thread count.
//
// Memory (bytes per layer per token of the prefill, f32 unless stated; SmolLM2-135M: H=9, Hkv=3,
// d=64; an 8B Llama/Qwen-style model: H=32, Hkv=8, d=128):
//   K+V in the KvCache (shared, not copied; incl. its key-panel copy: 3·Hkv·d·4)
//                                                  SmolLM2 2,304 B     8B 12,288 B
//   column sums, per boundary (H·4)                SmolLM2    36 B     8B    128 B
//   attention input, when asked (D·4, tokens before the last boundary; FastKVzip)
//                                                  SmolLM2 2,304 B     8B 16,384 B
//   attention cosines, when asked (4, all tokens)  SmolLM2     4 B     8B      4 B
//   (+ transient: a copy of the residual stream while a layer is observed, hidden·4 per token)
//   transient while a layer is observed: its key panels (Hkv·d·4) + per-thread score rows
//                                                  SmolLM2   768 B     8B  4,096 B
// Fixed per layer and boundary (independent of T):
//   window queries (W·H·d·4)                       SmolLM2 2,304·W B   8B 16,384·W B
//   query moments (H·d·8 + H·d²·8)                 SmolLM2   293 KiB   8B  4.0 MiB
// Only with all_queries (kvpress's NonCausalAttn, LeverageScore, Compactor, CAP), per boundary
// and per token of the boundary: every query row pre- and post-RoPE and the pre-RoPE keys
//   (2·H·d·4 + Hkv·d·4)                            SmolLM2 5,376 B     8B 36,864 B
// E.g. SmolLM2 at T = 2,048 with both boundaries, W = 64, everything on: ~ 30 layers × (2 × 36 B ×
// 2,048 + 2 × 144 KiB + 2 × 293 KiB) ≈ 30 MiB besides the cache (135 MiB).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "methods/layer_capture.h"
#include "runners/cpu/prefill_observer.h"
#include "runners/cpu/sequence_state.h"
#include "runners/model/model_weights.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::cpu {

class CpuPrefillCapture : public unit::PrefillCapture, public PrefillObserver {
 public:
  // `config` is the prefilled model's; its dtype decides the eager numerics' bf16 rounding.
  // Throws std::invalid_argument for an empty or non-positive boundary list, W < 0 or r0 < 0.
  CpuPrefillCapture(const model::ModelConfig& config, unit::CaptureOptions options);

  const unit::CaptureOptions& options() const override { return options_; }

  bool wants_pre_rope_queries() const override {
    return options_.query_moments || options_.all_queries;
  }
  // Called by CpuModel::prefill. Accepts one prefill of a fresh sequence (positions 0..T-1, T ≥
  // max boundary), layers in order; throws std::invalid_argument otherwise.
  void on_layer(const PrefillLayerView& view) override;
  bool wants_attention_residual() const override { return options_.attention_cosine; }
  // Keeps cos(x_i, x_i + attn_i) for every position of the prefill (options().attention_cosine).
  void on_attention_residual(int layer, std::span<const float> before,
                             std::span<const float> after) override;

  bool complete() const override;

  // The views for boundary b; keys/values point into `prefilled`, which must be a SequenceState.
  std::vector<methods::LayerCapture> layers(int boundary, const unit::SequenceCache& prefilled,
                                            const model::ModelWeights& weights,
                                            std::span<const float> rope_inv_freq) const override;
  // The same for a SequenceState (naming what differs when it does not match).
  std::vector<methods::LayerCapture> layers(int boundary, const SequenceState& state,
                                            const model::ModelWeights& weights,
                                            std::span<const float> rope_inv_freq) const;

 private:
  struct BoundaryData {
    int window_rows = 0;
    std::vector<float> window_queries;  // [H, window_rows, d]
    std::vector<float> column_sums;     // [H, b] (empty unless requested)
    std::int64_t query_count = 0;
    std::vector<double> query_sum;       // [H, d]
    std::vector<double> query_outer;     // [H, d, d]
    std::vector<float> queries_prerope;  // [H, b, d] (empty unless all_queries)
    std::vector<float> queries;          // [H, b, d]
    std::vector<float> keys_prerope;     // [Hkv, b, d]
  };

  void capture_window_queries(const PrefillLayerView& view, std::vector<BoundaryData>& out);
  void capture_column_sums(const PrefillLayerView& view, std::vector<BoundaryData>& out);
  void capture_query_moments(const PrefillLayerView& view, std::vector<BoundaryData>& out);
  void capture_all_queries(const PrefillLayerView& view, std::vector<BoundaryData>& out);

  model::ModelConfig config_;
  unit::CaptureOptions options_;
  // data_[layer][boundary index]
  std::vector<std::vector<BoundaryData>> data_;
  // attention_cosine_[layer][i] for every position i of the prefill (empty unless requested).
  // attention_input_[layer]: the input_layernorm output of positions 0..max(b)-1, [max(b), D]
  // (empty unless options().attention_input).
  std::vector<std::vector<float>> attention_input_;
  std::vector<std::vector<float>> attention_cosine_;
};

}  // namespace kvaudit::cpu
