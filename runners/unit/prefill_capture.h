// PrefillCapture: what eviction methods need from a unit's ONE prefill, captured per layer at each
// compression boundary, and handed out as methods::LayerCapture views (methods/layer_capture.h).
//
// The unit runner prefills prefix + context + question (T tokens) once with this observer. The
// protocols' boundaries are b = Lc (end of context, query-agnostic) and b = Lq (end of question,
// query-aware), 1 ≤ Lc ≤ Lq ≤ T (kvaudit BRIEF §2). Causality makes everything below for b a
// function of tokens 0..b-1 only, so one prefill serves both protocols. Per layer and boundary b:
//   window queries  the last w = min(W, b) post-RoPE queries before b (rows b-w..b-1),
//                   [H, w, d]; W = the largest window any of the unit's methods reads.
//   column sums     column_sums_b[h, j] = Σ_{i<b} A_h(i, j) for j < b, [H, b]. A is HF eager
//                   attention's probability matrix computed exactly as attention_eager.cpp does
//                   (same kernels: s = [q·k], [s·scale], p = [softmax_fp32(s)], brackets = bf16
//                   rounding when the model computes in bf16), rows summed in fp64 in increasing
//                   i, stored as f32. The sums are CUMULATIVE per boundary (all rows before b), not
//                   per segment; the question segment's share is column_sums_Lq − column_sums_Lc
//                   over the first Lc columns.
//   query moments   over pre-RoPE query rows [r0, b), r0 = moments_first_row (4, kvpress's n_sink),
//                   in fp64 and in increasing row order: Σ q [H, d] and Σ q qᵀ [H, d, d].
// Keys and values are not copied: layers() returns spans over the first b entries of each KV head
// of the prefilled SequenceState's cache; o_proj comes from the weights.
//
// Because every captured sum runs over rows in increasing order and stops at b, the data for
// b = Lc from the long prefill equals the data of a prefill of only the first Lc tokens whenever
// the forward itself gives rows < Lc the same bits in both prefills (CPU backend: the GEMMs' row
// count may change the last bits; tests/unit_runner checks what holds).
//
// Memory (bytes per layer per token of the prefill, f32 unless stated; SmolLM2-135M: H=9, Hkv=3,
// d=64; an 8B Llama/Qwen-style model: H=32, Hkv=8, d=128):
//   K+V in the KvCache (shared, not copied; incl. its key-panel copy: 3·Hkv·d·4)
//                                                  SmolLM2 2,304 B     8B 12,288 B
//   column sums, per boundary (H·4)                SmolLM2    36 B     8B    128 B
//   transient while a layer is observed: its key panels (Hkv·d·4) + per-thread score rows
//                                                  SmolLM2   768 B     8B  4,096 B
// Fixed per layer and boundary (independent of T):
//   window queries (W·H·d·4)                       SmolLM2 2,304·W B   8B 16,384·W B
//   query moments (H·d·8 + H·d²·8)                 SmolLM2   293 KiB   8B  4.0 MiB
// E.g. SmolLM2 at T = 2,048 with both boundaries, W = 64, everything on: ~ 30 layers × (2 × 36 B ×
// 2,048 + 2 × 144 KiB + 2 × 293 KiB) ≈ 30 MiB besides the cache (135 MiB).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/layer_capture.h"
#include "runners/cpu/prefill_observer.h"
#include "runners/cpu/sequence_state.h"
#include "runners/model/model_weights.h"

namespace kvaudit::unit {

struct CaptureOptions {
  // Boundaries b to capture at, each ≥ 1 (e.g. {Lc, Lq}); sorted and de-duplicated by the
  // constructor. The prefill must have at least max(b) tokens.
  std::vector<int> boundaries;
  int window_rows = 0;         // W ≥ 0: query rows kept before each boundary
  bool column_sums = false;    // compute attention column sums
  bool query_moments = false;  // compute pre-RoPE query moments
  int moments_first_row = 4;   // r0 ≥ 0 (kvpress ExpectedAttention's n_sink)
};

// Sorts and de-duplicates options.boundaries and checks them, W, r0 and the config's shape; throws
// std::invalid_argument prefixed with `owner` ("PrefillCapture", "CudaPrefillCapture") naming what
// is wrong. Shared by both captures' constructors.
void normalize_capture_options(CaptureOptions& options, const model::ModelConfig& config,
                               const std::string& owner);

// What one capture holds for a (layer, boundary), as spans into its own storage.
struct CapturedBoundary {
  int window_rows = 0;
  std::span<const float> window_queries;  // [H, window_rows, d]
  std::span<const float> column_sums;     // [H, b] or empty
  std::int64_t query_count = 0;
  std::span<const double> query_sum;    // [H, d] or empty
  std::span<const double> query_outer;  // [H, d, d] or empty
};

// The LayerCapture view of `layer` at `boundary` with every field but keys/values (the caller adds
// one span per KV head): the model's shape, the captured data, o_proj and the RoPE frequencies.
// Shared by PrefillCapture and the CUDA backend's CudaPrefillCapture, so both hand methods the same
// view.
methods::LayerCapture make_layer_capture(const model::ModelConfig& config,
                                         const CaptureOptions& options, int layer, int boundary,
                                         const CapturedBoundary& captured,
                                         std::span<const float> o_proj,
                                         std::span<const float> rope_inv_freq);

class PrefillCapture : public cpu::PrefillObserver {
 public:
  // `config` is the prefilled model's; its dtype decides the eager numerics' bf16 rounding.
  // Throws std::invalid_argument for an empty or non-positive boundary list, W < 0 or r0 < 0.
  PrefillCapture(const model::ModelConfig& config, CaptureOptions options);

  const CaptureOptions& options() const { return options_; }

  bool wants_pre_rope_queries() const override { return options_.query_moments; }
  // Called by CpuModel::prefill. Accepts one prefill of a fresh sequence (positions 0..T-1, T ≥
  // max boundary), layers in order; throws std::invalid_argument otherwise.
  void on_layer(const cpu::PrefillLayerView& view) override;

  // Whether every layer has been observed.
  bool complete() const;

  // The views for boundary b (one of options().boundaries), one per layer in order. keys/values
  // point into `state` (the prefilled sequence, not yet evicted or truncated below b), o_proj into
  // `weights`, rope_inv_freq to the given span, the rest into this capture: the views are valid as
  // long as all four live unchanged. Throws std::invalid_argument for an unknown boundary, an
  // incomplete capture, or a state/weights that do not match (naming what differs).
  std::vector<methods::LayerCapture> layers(int boundary, const cpu::SequenceState& state,
                                            const model::ModelWeights& weights,
                                            std::span<const float> rope_inv_freq) const;

 private:
  struct BoundaryData {
    int window_rows = 0;
    std::vector<float> window_queries;  // [H, window_rows, d]
    std::vector<float> column_sums;     // [H, b] (empty unless requested)
    std::int64_t query_count = 0;
    std::vector<double> query_sum;    // [H, d]
    std::vector<double> query_outer;  // [H, d, d]
  };

  void capture_window_queries(const cpu::PrefillLayerView& view, std::vector<BoundaryData>& out);
  void capture_column_sums(const cpu::PrefillLayerView& view, std::vector<BoundaryData>& out);
  void capture_query_moments(const cpu::PrefillLayerView& view, std::vector<BoundaryData>& out);

  model::ModelConfig config_;
  CaptureOptions options_;
  // data_[layer][boundary index]
  std::vector<std::vector<BoundaryData>> data_;
};

}  // namespace kvaudit::unit
