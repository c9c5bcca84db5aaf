// The device-neutral parts of a prefill capture (prefill_capture.h): option checks and the
// LayerCapture view both captures hand to methods.
#include "runners/unit/prefill_capture.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvaudit::unit {

void normalize_capture_options(CaptureOptions& options, const model::ModelConfig& config,
                               const std::string& owner) {
  const auto check = [&](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(owner + ": " + message);
  };
  check(!options.boundaries.empty(), "no boundary to capture at");
  std::sort(options.boundaries.begin(), options.boundaries.end());
  options.boundaries.erase(std::unique(options.boundaries.begin(), options.boundaries.end()),
                           options.boundaries.end());
  check(options.boundaries.front() >= 1,
        "boundary " + std::to_string(options.boundaries.front()) + " is not positive");
  check(options.window_rows >= 0,
        "window_rows " + std::to_string(options.window_rows) + " is negative");
  check(options.moments_first_row >= 0,
        "moments_first_row " + std::to_string(options.moments_first_row) + " is negative");
  check(config.num_layers > 0 && config.num_heads > 0 && config.num_kv_heads > 0 &&
            config.head_dim > 0 && config.num_heads % config.num_kv_heads == 0,
        "the model config has no valid layer/head shape");
}

methods::LayerCapture layer_capture_shape(const model::ModelConfig& config, int layer, int length) {
  methods::LayerCapture view;
  view.layer = layer;
  view.num_layers = config.num_layers;
  view.num_heads = config.num_heads;
  view.num_kv_heads = config.num_kv_heads;
  view.head_dim = config.head_dim;
  view.hidden_size = config.hidden_size;
  view.length = length;
  view.model_is_bf16 = config.dtype == model::ComputeDtype::bf16;
  return view;
}

methods::LayerCapture make_layer_capture(const model::ModelConfig& config,
                                         const CaptureOptions& options, int layer, int boundary,
                                         const CapturedBoundary& captured,
                                         std::span<const float> o_proj,
                                         std::span<const float> rope_inv_freq) {
  methods::LayerCapture view = layer_capture_shape(config, layer, boundary);
  view.window_rows = captured.window_rows;
  view.window_queries = captured.window_queries;
  view.column_sums = captured.column_sums;
  view.moments_first_row = options.moments_first_row;
  view.query_count = options.query_moments ? captured.query_count : 0;
  view.query_sum = captured.query_sum;
  view.query_outer = captured.query_outer;
  view.queries_prerope = captured.queries_prerope;
  view.queries = captured.queries;
  view.keys_prerope = captured.keys_prerope;
  view.attention_cosine = captured.attention_cosine;
  view.o_proj = o_proj;
  view.rope_inv_freq = rope_inv_freq;
  return view;
}

}  // namespace kvaudit::unit
