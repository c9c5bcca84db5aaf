// PrefillCapture: what eviction methods need from a unit's ONE prefill, captured per layer at each
// compression boundary and handed out as methods::LayerCapture views (methods/layer_capture.h).
// An engine makes it (InferenceEngine::new_capture); cpu::CpuPrefillCapture and
// cuda::CudaPrefillCapture implement it, and tests/cuda checks that they agree.
//
// The fan-out prefills prefix + context + question (T tokens) once with a capture. The protocols'
// boundaries are b = Lc (end of context, query-agnostic) and b = Lq (end of question,
// query-aware), 1 ≤ Lc ≤ Lq ≤ T (docs/design/protocols.md). Causality makes everything below for
// b a function of tokens 0..b-1 only, so one prefill serves both protocols. Per layer and b:
//   window queries  the last w = min(W, b) post-RoPE queries before b (rows b-w..b-1),
//                   [H, w, d]; W = the largest window any of the unit's methods reads.
//   column sums     column_sums_b[h, j] = Σ_{i<b} A_h(i, j) for j < b, [H, b]. A is HF eager
//                   attention's probability matrix with HF's bf16 rounding points when the model
//                   computes in bf16 (s = [q·k], [s·scale], p = [softmax_fp32(s)]); rows summed in
//                   fp64 in increasing i, stored as f32. The sums are CUMULATIVE per boundary (all
//                   rows before b); the question segment's share is column_sums_Lq −
//                   column_sums_Lc over the first Lc columns.
//   query moments   over pre-RoPE query rows [r0, b), r0 = moments_first_row (4, kvpress's
//                   n_sink), in fp64 and in increasing row order: Σ q [H, d], Σ q qᵀ [H, d, d].
//   all queries     (all_queries) every query row before b, pre- and post-RoPE, [H, b, d], and
//                   the pre-RoPE keys of positions 0..b-1, [Hkv, b, d]: copies, f32
//                   (H·d + H·d + Hkv·d)·4 bytes per layer per token, per boundary.
//   attention cosine (attention_cosine) per position i < b, cos(x_i, x_i + attn_i) of the residual
//                   stream before and after the layer's self-attention block, in fp64, stored as
//                   f32, [b] (SqueezeAttention; the CPU capture computes it, the CUDA one not yet).
//   attention input (attention_input) the input_layernorm output of positions 0..b-1, [b, D]
//                   (FastKVzip's gates), f32 D·4 bytes per layer per token; CPU capture only.
//   keys / values   the first b entries of every KV head (post-RoPE keys), and o_proj from the
//                   host weights.
// Because every captured sum runs over rows in increasing order and stops at b, the data for
// b = Lc from the long prefill equals that of a prefill of only the first Lc tokens whenever the
// forward itself gives rows < Lc the same bits in both prefills (tests/unit_runner checks what
// holds on the CPU).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "methods/layer_capture.h"
#include "methods/method.h"
#include "runners/model/model_config.h"
#include "runners/model/model_weights.h"

namespace kvaudit::unit {

class SequenceCache;  // inference_engine.h

struct CaptureOptions {
  // Boundaries b to capture at, each ≥ 1 (e.g. {Lc, Lq}); sorted and de-duplicated by the
  // captures. The prefill must have at least max(b) tokens.
  std::vector<int> boundaries;
  int window_rows = 0;            // W ≥ 0: query rows kept before each boundary
  bool column_sums = false;       // compute attention column sums
  bool query_moments = false;     // compute pre-RoPE query moments
  int moments_first_row = 4;      // r0 ≥ 0 (kvpress ExpectedAttention's n_sink)
  bool attention_cosine = false;  // cos(x_i, x_i + attn_i) per position (SqueezeAttention)
  bool all_queries = false;       // keep every query row (pre- and post-RoPE) and pre-RoPE key
  bool attention_input = false;   // keep every position's input_layernorm output (FastKVzip)
};

// Sorts and de-duplicates options.boundaries and checks them, W, r0 and the config's shape; throws
// std::invalid_argument prefixed with `owner` ("CpuPrefillCapture", "CudaPrefillCapture") naming
// what is wrong. Shared by both captures' constructors.
void normalize_capture_options(CaptureOptions& options, const model::ModelConfig& config,
                               const std::string& owner);

// What one capture holds for a (layer, boundary), as spans into its own storage.
struct CapturedBoundary {
  int window_rows = 0;
  std::span<const float> window_queries;  // [H, window_rows, d]
  std::span<const float> column_sums;     // [H, b] or empty
  std::int64_t query_count = 0;
  std::span<const double> query_sum;        // [H, d] or empty
  std::span<const double> query_outer;      // [H, d, d] or empty
  std::span<const float> queries_prerope;   // [H, b, d] or empty (all_queries)
  std::span<const float> queries;           // [H, b, d] or empty (all_queries)
  std::span<const float> keys_prerope;      // [Hkv, b, d] or empty (all_queries)
  std::span<const float> attention_cosine;  // [b] or empty (CaptureOptions::attention_cosine)
};

// A LayerCapture holding only the model's shape (layer, layer/head counts, head_dim, hidden size,
// bf16) and `length`: the start of every view, the prefill's and decode-time compression's.
methods::LayerCapture layer_capture_shape(const model::ModelConfig& config, int layer, int length);

// The LayerCapture view of `layer` at `boundary` with every field but keys/values (the caller adds
// one span per KV head): the model's shape, the captured data, o_proj and the RoPE frequencies.
// Both captures build their views with it, so methods see the same view on either device.
methods::LayerCapture make_layer_capture(const model::ModelConfig& config,
                                         const CaptureOptions& options, int layer, int boundary,
                                         const CapturedBoundary& captured,
                                         std::span<const float> o_proj,
                                         std::span<const float> rope_inv_freq);

class PrefillCapture {
 public:
  virtual ~PrefillCapture() = default;

  // The options after normalize_capture_options.
  virtual const CaptureOptions& options() const = 0;
  // Whether every layer of one prefill has been observed.
  virtual bool complete() const = 0;

  // The views for boundary b (one of options().boundaries), one per layer in order. They point
  // into this capture, into `prefilled` (the prefilled cache, not yet evicted or truncated below
  // b; the CUDA capture keeps its own copies and does not read it), into `weights` (o_proj) and to
  // `rope_inv_freq`: valid as long as all four live unchanged. Throws std::invalid_argument for an
  // unknown boundary, an incomplete capture or a cache/weights that do not match.
  virtual std::vector<methods::LayerCapture> layers(int boundary, const SequenceCache& prefilled,
                                                    const model::ModelWeights& weights,
                                                    std::span<const float> rope_inv_freq) const = 0;

  // A device fast path for `method`'s selection at `boundary` (the GPU scorers + per-head top-k,
  // runners/cuda/capture): the kept sets, or nullopt when this capture has none for the method
  // (the fan-out then runs method.select on layers()). Each fast path is tested against the
  // method's own select. Not for concurrent use. Throws like the method would.
  virtual std::optional<methods::Selection> device_selection(const methods::Method& method,
                                                             int boundary,
                                                             const methods::Budget& budget) {
    (void)method;
    (void)boundary;
    (void)budget;
    return std::nullopt;
  }
};

}  // namespace kvaudit::unit
