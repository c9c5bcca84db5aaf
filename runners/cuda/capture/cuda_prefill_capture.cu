// CudaPrefillCapture (cuda_prefill_capture.h): validation, buffers and downloads around the
// capture kernels (capture_kernels.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "runners/cuda/capture/capture_kernels.h"
#include "runners/cuda/capture/cuda_prefill_capture.h"
#include "runners/cuda/capture/gpu_scorers.h"
#include "runners/cuda/capture/gpu_top_k.h"
#include "runners/cuda/cuda_check.h"
#include "runners/model/rope_tables.h"

namespace kvaudit::cuda {
namespace {

std::size_t as_size(int n) { return static_cast<std::size_t>(n); }

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("CudaPrefillCapture: " + message);
}

template <typename T>
std::vector<T> download_all(const DeviceBuffer<T>& buffer) {
  return buffer.empty() ? std::vector<T>{} : buffer.to_host();
}

}  // namespace

CudaPrefillCapture::CudaPrefillCapture(const model::ModelConfig& config,
                                       unit::CaptureOptions options)
    : config_(config), options_(std::move(options)) {
  unit::normalize_capture_options(options_, config_, "CudaPrefillCapture");
  require(options_.boundaries.size() <= as_size(kMaxCaptureBoundaries),
          std::to_string(options_.boundaries.size()) + " boundaries, at most " +
              std::to_string(kMaxCaptureBoundaries) + " are supported");
  // Methods reading every query row and the pre-RoPE keys (LayerCapture::queries, queries_prerope,
  // keys_prerope) run on the CPU engine only: this capture does not download them.
  require(!options_.all_queries,
          "the all-queries capture (every query row and the pre-RoPE keys, read by "
          "non_causal_attention, leverage, compactor and cap) is not available on the GPU; run "
          "these methods with --device cpu");
  // The input_layernorm output of every position (LayerCapture::attention_input, FastKVzip's
  // gates) is not downloaded either.
  require(!options_.attention_input,
          "the attention-input capture (every position's input_layernorm output, read by "
          "fastkvzip) is not available on the GPU; run this method with --device cpu");
  kv_rows_ = options_.boundaries.back();
  rope_inv_freq_ = model::rope_inv_freq(config_.rope, config_.head_dim);
}

bool CudaPrefillCapture::complete() const { return layers_.size() == as_size(config_.num_layers); }

void CudaPrefillCapture::check_view(const CudaPrefillLayerView& view, cudaStream_t stream) const {
  const std::string where = "layer " + std::to_string(view.layer) + ": ";
  require(view.layer == static_cast<int>(layers_.size()),
          "layer " + std::to_string(view.layer) + " observed, expected layer " +
              std::to_string(layers_.size()) + " (one prefill, layers in order)");
  require(view.num_heads == config_.num_heads && view.num_kv_heads == config_.num_kv_heads &&
              view.head_dim == config_.head_dim,
          where + "the view's head shape differs from the model config");
  require(view.num_tokens >= kv_rows_,
          where + "the prefill has " + std::to_string(view.num_tokens) +
              " tokens, fewer than boundary " + std::to_string(kv_rows_));
  require(view.first_position == 0, where + "first_position " +
                                        std::to_string(view.first_position) +
                                        ": the prefill must start a fresh sequence at 0");
  require(view.queries != nullptr, where + "queries is null");
  require(!options_.query_moments || view.queries_pre_rope != nullptr,
          where + "pre-RoPE queries are missing (wants_pre_rope_queries() is true)");
  const DeviceSequenceKv& s = view.sequence;
  require(s.keys != nullptr && s.values != nullptr && s.positions != nullptr,
          where + "the sequence's keys/values/positions pointer is null");
  require(s.num_kv_heads == config_.num_kv_heads && s.head_dim == config_.head_dim,
          where + "the sequence's cache has another head shape than the model");
  require(s.capacity >= kv_rows_, where + "sequence capacity " + std::to_string(s.capacity) +
                                      " below boundary " + std::to_string(kv_rows_));
  require(view.kv_lengths.size() == as_size(config_.num_kv_heads),
          where + "kv_lengths has " + std::to_string(view.kv_lengths.size()) +
              " entries, expected " + std::to_string(config_.num_kv_heads));
  for (std::size_t g = 0; g < view.kv_lengths.size(); ++g) {
    require(view.kv_lengths[g] >= kv_rows_, where + "kv head " + std::to_string(g) + " holds " +
                                                std::to_string(view.kv_lengths[g]) +
                                                " entries, fewer than boundary " +
                                                std::to_string(kv_rows_));
  }
  // Slot j must hold position j (a fresh prefill): checked on a download of the positions.
  DeviceBuffer<std::int32_t> positions(as_size(config_.num_kv_heads) * as_size(kv_rows_));
  copy_position_prefix(s, view.layer, kv_rows_, positions.data(), stream);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<std::int32_t> host = positions.to_host();
  for (std::size_t idx = 0; idx < host.size(); ++idx) {
    const std::size_t slot = idx % as_size(kv_rows_);
    require(host[idx] == static_cast<std::int32_t>(slot),
            where + "kv head " + std::to_string(idx / as_size(kv_rows_)) + " slot " +
                std::to_string(slot) + " holds position " + std::to_string(host[idx]) +
                " (a fresh prefill keeps position j in slot j)");
  }
}

void CudaPrefillCapture::on_layer(const CudaPrefillLayerView& view, cudaStream_t stream) {
  check_view(view, stream);
  stream_ = stream;
  const std::size_t heads = as_size(config_.num_heads);
  const std::size_t kv_heads = as_size(config_.num_kv_heads);
  const std::size_t dim = as_size(config_.head_dim);
  const bool bf16 = config_.dtype == model::ComputeDtype::bf16;
  const int count = static_cast<int>(options_.boundaries.size());

  LayerData layer;
  layer.keys = DeviceBuffer<float>(kv_heads * as_size(kv_rows_) * dim);
  layer.values = DeviceBuffer<float>(kv_heads * as_size(kv_rows_) * dim);
  copy_kv_prefix(view.sequence, view.layer, kv_rows_, layer.keys.data(), layer.values.data(),
                 stream);

  layer.boundaries.resize(options_.boundaries.size());
  ColumnSumTargets column_targets;
  MomentTargets moment_targets;
  column_targets.count = count;
  moment_targets.count = count;
  for (int k = 0; k < count; ++k) {
    const int b = options_.boundaries[as_size(k)];
    BoundaryData& data = layer.boundaries[as_size(k)];
    data.window_rows = std::min(options_.window_rows, b);
    data.window_queries = DeviceBuffer<float>(heads * as_size(data.window_rows) * dim);
    gather_window_queries(view.queries, config_.num_heads, config_.head_dim, b, data.window_rows,
                          data.window_queries.data(), stream);
    if (options_.column_sums) {
      data.column_sums = DeviceBuffer<float>(heads * as_size(b));
      column_targets.boundaries[k] = b;
      column_targets.outputs[k] = data.column_sums.data();
    }
    if (options_.query_moments) {
      data.query_count = b > options_.moments_first_row ? b - options_.moments_first_row : 0;
      data.query_sum = DeviceBuffer<double>(heads * dim);
      data.query_outer = DeviceBuffer<double>(heads * dim * dim);
      moment_targets.boundaries[k] = b;
      moment_targets.sums[k] = data.query_sum.data();
      moment_targets.outers[k] = data.query_outer.data();
    }
  }

  DeviceBuffer<float> row_max, row_sum;  // live until the stream is synchronized below
  if (options_.column_sums) {
    const EagerProblem problem{
        .queries = view.queries,
        .keys = layer.keys.data(),
        .num_heads = config_.num_heads,
        .num_kv_heads = config_.num_kv_heads,
        .head_dim = config_.head_dim,
        .key_rows = kv_rows_,
        .rows = kv_rows_,
        // The CPU capture's scale: head_dim^-0.5 in double, as f32.
        .scale = static_cast<float>(std::pow(static_cast<double>(config_.head_dim), -0.5)),
        .bf16 = bf16};
    row_max = DeviceBuffer<float>(heads * as_size(kv_rows_));
    row_sum = DeviceBuffer<float>(heads * as_size(kv_rows_));
    eager_row_statistics(problem, row_max.data(), row_sum.data(), stream);
    eager_column_sums(problem, row_max.data(), row_sum.data(), column_targets, stream);
  }
  if (options_.query_moments) {
    query_moments(view.queries_pre_rope, config_.num_heads, config_.head_dim,
                  options_.moments_first_row, moment_targets, stream);
  }
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));

  layer.host_keys = download_all(layer.keys);
  layer.host_values = download_all(layer.values);
  for (BoundaryData& data : layer.boundaries) {
    data.host_window_queries = download_all(data.window_queries);
    data.host_column_sums = download_all(data.column_sums);
    data.host_query_sum = download_all(data.query_sum);
    data.host_query_outer = download_all(data.query_outer);
  }
  layers_.push_back(std::move(layer));
}

std::size_t CudaPrefillCapture::boundary_index(int boundary) const {
  const auto found = std::find(options_.boundaries.begin(), options_.boundaries.end(), boundary);
  require(found != options_.boundaries.end(),
          "boundary " + std::to_string(boundary) + " was not captured");
  require(complete(), "the capture saw " + std::to_string(layers_.size()) + " of " +
                          std::to_string(config_.num_layers) + " layers (no complete prefill)");
  return static_cast<std::size_t>(found - options_.boundaries.begin());
}

std::vector<methods::LayerCapture> CudaPrefillCapture::layers(
    int boundary, const model::ModelWeights& weights, std::span<const float> rope_inv_freq) const {
  const std::size_t index = boundary_index(boundary);
  const model::ModelConfig& c = weights.config;
  require(c.num_layers == config_.num_layers && c.num_heads == config_.num_heads &&
              c.num_kv_heads == config_.num_kv_heads && c.head_dim == config_.head_dim &&
              weights.layers.size() == as_size(c.num_layers),
          "weights '" + weights.source + "' have another shape than the captured model");
  require(rope_inv_freq.size() == as_size(c.head_dim / 2),
          "rope_inv_freq has " + std::to_string(rope_inv_freq.size()) + " entries, expected " +
              std::to_string(c.head_dim / 2));
  const std::size_t b = as_size(boundary);
  const std::size_t dim = as_size(c.head_dim);
  const std::size_t head_stride = as_size(kv_rows_) * dim;
  std::vector<methods::LayerCapture> result(as_size(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerData& layer = layers_[as_size(l)];
    const BoundaryData& data = layer.boundaries[index];
    methods::LayerCapture& view = result[as_size(l)];
    view = unit::make_layer_capture(config_, options_, l, boundary,
                                    {data.window_rows,
                                     data.host_window_queries,
                                     data.host_column_sums,
                                     data.query_count,
                                     data.host_query_sum,
                                     data.host_query_outer,
                                     {},
                                     {},
                                     {},
                                     {}},
                                    weights.layers[as_size(l)].o_proj, rope_inv_freq);
    for (std::size_t g = 0; g < as_size(c.num_kv_heads); ++g) {
      view.keys.push_back(
          std::span<const float>(layer.host_keys).subspan(g * head_stride, b * dim));
      view.values.push_back(
          std::span<const float>(layer.host_values).subspan(g * head_stride, b * dim));
    }
  }
  return result;
}

std::vector<methods::LayerCapture> CudaPrefillCapture::layers(
    int boundary, const unit::SequenceCache& prefilled, const model::ModelWeights& weights,
    std::span<const float> rope_inv_freq) const {
  (void)prefilled;  // the capture holds its own copies of the keys and values
  return layers(boundary, weights, rope_inv_freq);
}

std::optional<methods::Selection> CudaPrefillCapture::device_selection(
    const methods::Method& method, int boundary, const methods::Budget& budget) {
  const std::optional<GpuScorerSpec> spec = gpu_scorer_for(method.parameters());
  if (!spec) return std::nullopt;
  boundary_index(boundary);  // a captured boundary of a complete capture
  const std::size_t per_layer = as_size(config_.num_kv_heads) * as_size(boundary);
  const auto key = std::make_pair(&method, boundary);
  auto found = scores_.find(key);
  if (found == scores_.end()) {
    DeviceBuffer<float> scores(per_layer * as_size(config_.num_layers));
    for (int l = 0; l < config_.num_layers; ++l) {
      score_on_gpu(*spec, device_layer(l, boundary), rope_inv_freq_,
                   scores.data() + per_layer * as_size(l), stream_);
    }
    found = scores_.emplace(key, std::move(scores)).first;
  }
  const std::int64_t n_kept = methods::kept_count(boundary, budget.compression);
  methods::Selection selection;
  for (int l = 0; l < config_.num_layers; ++l) {
    selection.kept.push_back(select_top_k_on_gpu(found->second.data() + per_layer * as_size(l),
                                                 config_.num_kv_heads, boundary, n_kept, stream_));
  }
  return selection;
}

DeviceLayerCapture CudaPrefillCapture::device_layer(int layer, int boundary) const {
  const std::size_t index = boundary_index(boundary);
  require(
      layer >= 0 && layer < config_.num_layers,
      "layer " + std::to_string(layer) + " outside 0.." + std::to_string(config_.num_layers - 1));
  const LayerData& data = layers_[as_size(layer)];
  const BoundaryData& at = data.boundaries[index];
  DeviceLayerCapture view;
  view.layer = layer;
  view.num_layers = config_.num_layers;
  view.num_heads = config_.num_heads;
  view.num_kv_heads = config_.num_kv_heads;
  view.head_dim = config_.head_dim;
  view.length = boundary;
  view.model_is_bf16 = config_.dtype == model::ComputeDtype::bf16;
  view.keys = data.keys.data();
  view.values = data.values.data();
  view.kv_rows = kv_rows_;
  view.window_rows = at.window_rows;
  view.window_queries = at.window_queries.empty() ? nullptr : at.window_queries.data();
  view.column_sums = at.column_sums.empty() ? nullptr : at.column_sums.data();
  view.moments_first_row = options_.moments_first_row;
  view.query_count = options_.query_moments ? at.query_count : 0;
  view.query_sum = at.query_sum.empty() ? nullptr : at.query_sum.data();
  view.query_outer = at.query_outer.empty() ? nullptr : at.query_outer.data();
  return view;
}

}  // namespace kvaudit::cuda
