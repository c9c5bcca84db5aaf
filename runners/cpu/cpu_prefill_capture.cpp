// CpuPrefillCapture: per-layer, per-boundary capture of one CPU prefill; see cpu_prefill_capture.h.
#include "runners/cpu/cpu_prefill_capture.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "runners/cpu/attention_math.h"
#include "runners/cpu/key_panels.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::cpu {
namespace {

// Query rows scored together (score_tile takes 1..4 rows; results do not depend on it).
constexpr std::size_t kScoreTileRows = 4;

std::size_t as_size(int n) { return static_cast<std::size_t>(n); }

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("CpuPrefillCapture: " + message);
}

// Token-major rows [T, heads, d] → head-major [heads, b, d] of the first b rows.
std::vector<float> head_major_prefix(std::span<const float> rows, std::size_t heads,
                                     std::size_t dim, std::size_t b) {
  std::vector<float> out(heads * b * dim);
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t row = 0; row < b; ++row) {
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>((row * heads + h) * dim), dim,
                  out.begin() + static_cast<std::ptrdiff_t>((h * b + row) * dim));
    }
  }
  return out;
}

}  // namespace

CpuPrefillCapture::CpuPrefillCapture(const model::ModelConfig& config, unit::CaptureOptions options)
    : config_(config), options_(std::move(options)) {
  unit::normalize_capture_options(options_, config_, "CpuPrefillCapture");
}

bool CpuPrefillCapture::complete() const { return data_.size() == as_size(config_.num_layers); }

void CpuPrefillCapture::on_layer(const PrefillLayerView& view) {
  require(view.layer == static_cast<int>(data_.size()),
          "layer " + std::to_string(view.layer) + " observed, expected layer " +
              std::to_string(data_.size()) + " (one prefill, layers in order)");
  require(view.num_heads == config_.num_heads && view.num_kv_heads == config_.num_kv_heads &&
              view.head_dim == config_.head_dim,
          "layer " + std::to_string(view.layer) + " has another head shape than the config");
  const int max_boundary = options_.boundaries.back();
  require(view.num_tokens >= max_boundary, "the prefill has " + std::to_string(view.num_tokens) +
                                               " tokens, fewer than boundary " +
                                               std::to_string(max_boundary));
  require(view.positions.size() == as_size(view.num_tokens) &&
              (view.positions.empty() || view.positions.front() == 0),
          "the prefill must start a fresh sequence at position 0");
  const std::size_t t = as_size(view.num_tokens);
  const std::size_t q_width = as_size(view.num_heads) * as_size(view.head_dim);
  const std::size_t kv_width = as_size(view.num_kv_heads) * as_size(view.head_dim);
  require(view.queries.size() == t * q_width && view.keys.size() == t * kv_width &&
              view.values.size() == t * kv_width,
          "layer " + std::to_string(view.layer) + ": Q/K/V sizes do not match the view's shape");
  require(!options_.query_moments || view.queries_pre_rope.size() == t * q_width,
          "layer " + std::to_string(view.layer) + ": pre-RoPE queries are missing");
  require(!options_.all_queries || (view.queries_pre_rope.size() == t * q_width &&
                                    view.keys_pre_rope.size() == t * kv_width),
          "layer " + std::to_string(view.layer) + ": pre-RoPE queries or keys are missing");

  std::vector<BoundaryData> layer(options_.boundaries.size());
  capture_window_queries(view, layer);
  if (options_.column_sums) capture_column_sums(view, layer);
  if (options_.query_moments) capture_query_moments(view, layer);
  if (options_.all_queries) capture_all_queries(view, layer);
  if (options_.attention_input) {
    const std::size_t hidden = as_size(config_.hidden_size);
    require(view.attention_input.size() == t * hidden,
            "layer " + std::to_string(view.layer) + ": the attention input is missing");
    attention_input_.emplace_back(
        view.attention_input.begin(),
        view.attention_input.begin() + static_cast<std::ptrdiff_t>(as_size(max_boundary) * hidden));
  }
  data_.push_back(std::move(layer));
}

void CpuPrefillCapture::capture_all_queries(const PrefillLayerView& view,
                                            std::vector<BoundaryData>& out) {
  const std::size_t heads = as_size(view.num_heads);
  const std::size_t kv_heads = as_size(view.num_kv_heads);
  const std::size_t dim = as_size(view.head_dim);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::size_t b = as_size(options_.boundaries[k]);
    out[k].queries_prerope = head_major_prefix(view.queries_pre_rope, heads, dim, b);
    out[k].queries = head_major_prefix(view.queries, heads, dim, b);
    out[k].keys_prerope = head_major_prefix(view.keys_pre_rope, kv_heads, dim, b);
  }
}

void CpuPrefillCapture::capture_window_queries(const PrefillLayerView& view,
                                               std::vector<BoundaryData>& out) {
  const std::size_t heads = as_size(view.num_heads);
  const std::size_t dim = as_size(view.head_dim);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const int b = options_.boundaries[k];
    const int w = std::min(options_.window_rows, b);
    BoundaryData& data = out[k];
    data.window_rows = w;
    data.window_queries.resize(heads * as_size(w) * dim);
    for (std::size_t h = 0; h < heads; ++h) {
      for (int r = 0; r < w; ++r) {
        const std::size_t row = as_size(b - w + r);
        std::copy_n(view.queries.begin() + static_cast<std::ptrdiff_t>((row * heads + h) * dim),
                    dim,
                    data.window_queries.begin() +
                        static_cast<std::ptrdiff_t>((h * as_size(w) + as_size(r)) * dim));
      }
    }
  }
}

void CpuPrefillCapture::capture_column_sums(const PrefillLayerView& view,
                                            std::vector<BoundaryData>& out) {
  const std::size_t heads = as_size(view.num_heads);
  const std::size_t kv_heads = as_size(view.num_kv_heads);
  const std::size_t dim = as_size(view.head_dim);
  const std::size_t group = heads / kv_heads;
  const std::size_t last = as_size(options_.boundaries.back());  // rows/keys needed
  const float scale = static_cast<float>(std::pow(static_cast<double>(view.head_dim), -0.5));
  const bool bf16 = config_.dtype == model::ComputeDtype::bf16;

  // Keys of the first `last` positions of each KV head in the kernels' panel layout.
  std::vector<std::vector<float>> panels(kv_heads);
  {
    std::vector<float> rows(last * dim);
    for (std::size_t g = 0; g < kv_heads; ++g) {
      for (std::size_t j = 0; j < last; ++j) {
        std::copy_n(view.keys.begin() + static_cast<std::ptrdiff_t>((j * kv_heads + g) * dim), dim,
                    rows.begin() + static_cast<std::ptrdiff_t>(j * dim));
      }
      panels[g] = keys_to_panels(rows.data(), last, dim);
    }
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k].column_sums.assign(heads * as_size(options_.boundaries[k]), 0.0f);
  }

  const std::ptrdiff_t head_count = static_cast<std::ptrdiff_t>(heads);
#pragma omp parallel for schedule(dynamic, 1) if (head_count > 1)
  for (std::ptrdiff_t hh = 0; hh < head_count; ++hh) {
    const std::size_t h = static_cast<std::size_t>(hh);
    const std::vector<float>& keys = panels[h / group];
    const std::size_t stride = padded_key_count(last);
    std::vector<float> scores(kScoreTileRows * stride);
    std::vector<double> sums(last, 0.0);
    std::size_t row = 0;
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::size_t boundary = as_size(options_.boundaries[k]);
      while (row < boundary) {
        // Up to four consecutive rows of head h, never crossing the boundary.
        const std::size_t count = std::min(kScoreTileRows, boundary - row);
        const float* queries = view.queries.data() + (row * heads + h) * dim;
        score_tile(queries, heads * dim, count, keys.data(), 0, row + count, dim, scores.data(),
                   stride);
        for (std::size_t r = 0; r < count; ++r) {
          float* p = scores.data() + r * stride;
          const std::size_t visible = row + r + 1;  // causal: keys 0..row+r
          eager_probabilities(p, visible, scale, bf16);
          for (std::size_t j = 0; j < visible; ++j) sums[j] += static_cast<double>(p[j]);
        }
        row += count;
      }
      float* column = out[k].column_sums.data() + h * boundary;
      for (std::size_t j = 0; j < boundary; ++j) column[j] = static_cast<float>(sums[j]);
    }
  }
}

void CpuPrefillCapture::capture_query_moments(const PrefillLayerView& view,
                                              std::vector<BoundaryData>& out) {
  const std::size_t heads = as_size(view.num_heads);
  const std::size_t dim = as_size(view.head_dim);
  const std::size_t first = as_size(options_.moments_first_row);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::size_t boundary = as_size(options_.boundaries[k]);
    out[k].query_count = boundary > first ? static_cast<std::int64_t>(boundary - first) : 0;
    out[k].query_sum.assign(heads * dim, 0.0);
    out[k].query_outer.assign(heads * dim * dim, 0.0);
  }
  const std::ptrdiff_t head_count = static_cast<std::ptrdiff_t>(heads);
#pragma omp parallel for schedule(dynamic, 1) if (head_count > 1)
  for (std::ptrdiff_t hh = 0; hh < head_count; ++hh) {
    const std::size_t h = static_cast<std::size_t>(hh);
    std::vector<double> sum(dim, 0.0), outer(dim * dim, 0.0);  // upper triangle of outer
    std::vector<double> q(dim);
    std::size_t row = first;
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::size_t boundary = as_size(options_.boundaries[k]);
      for (; row < boundary; ++row) {
        const float* source = view.queries_pre_rope.data() + (row * heads + h) * dim;
        for (std::size_t e = 0; e < dim; ++e) q[e] = static_cast<double>(source[e]);
        for (std::size_t e = 0; e < dim; ++e) {
          sum[e] += q[e];
          double* line = outer.data() + e * dim;
          for (std::size_t f = e; f < dim; ++f) line[f] += q[e] * q[f];
        }
      }
      std::copy(sum.begin(), sum.end(),
                out[k].query_sum.begin() + static_cast<std::ptrdiff_t>(h * dim));
      double* target = out[k].query_outer.data() + h * dim * dim;
      for (std::size_t e = 0; e < dim; ++e) {
        for (std::size_t f = e; f < dim; ++f) {
          target[e * dim + f] = outer[e * dim + f];
          target[f * dim + e] = outer[e * dim + f];
        }
      }
    }
  }
}

void CpuPrefillCapture::on_attention_residual(int layer, std::span<const float> before,
                                              std::span<const float> after) {
  require(
      layer == static_cast<int>(attention_cosine_.size()) && layer < static_cast<int>(data_.size()),
      "attention residual of layer " + std::to_string(layer) + " observed out of order");
  const std::size_t hidden = as_size(config_.hidden_size);
  require(hidden > 0 && before.size() == after.size() && before.size() % hidden == 0,
          "layer " + std::to_string(layer) + ": residual sizes do not match the hidden size");
  const std::size_t tokens = before.size() / hidden;
  std::vector<float> cosine(tokens);
  for (std::size_t i = 0; i < tokens; ++i) {
    // torch.nn.functional.cosine_similarity: x·y / max(‖x‖·‖y‖, 1e-8), here in fp64.
    double dot = 0.0, norm_before = 0.0, norm_after = 0.0;
    for (std::size_t e = 0; e < hidden; ++e) {
      const double x = static_cast<double>(before[i * hidden + e]);
      const double y = static_cast<double>(after[i * hidden + e]);
      dot += x * y;
      norm_before += x * x;
      norm_after += y * y;
    }
    cosine[i] = static_cast<float>(dot / std::max(std::sqrt(norm_before * norm_after), 1e-8));
  }
  attention_cosine_.push_back(std::move(cosine));
}

std::vector<methods::LayerCapture> CpuPrefillCapture::layers(
    int boundary, const unit::SequenceCache& prefilled, const model::ModelWeights& weights,
    std::span<const float> rope_inv_freq) const {
  const auto* state = dynamic_cast<const SequenceState*>(&prefilled);
  require(state != nullptr, "the prefilled cache is not a CPU sequence (another engine's cache)");
  return layers(boundary, *state, weights, rope_inv_freq);
}

std::vector<methods::LayerCapture> CpuPrefillCapture::layers(
    int boundary, const SequenceState& state, const model::ModelWeights& weights,
    std::span<const float> rope_inv_freq) const {
  const auto found = std::find(options_.boundaries.begin(), options_.boundaries.end(), boundary);
  require(found != options_.boundaries.end(),
          "boundary " + std::to_string(boundary) + " was not captured");
  require(complete(), "the capture saw " + std::to_string(data_.size()) + " of " +
                          std::to_string(config_.num_layers) + " layers (no complete prefill)");
  const model::ModelConfig& c = weights.config;
  require(c.num_layers == config_.num_layers && c.num_heads == config_.num_heads &&
              c.num_kv_heads == config_.num_kv_heads && c.head_dim == config_.head_dim &&
              weights.layers.size() == as_size(c.num_layers),
          "weights '" + weights.source + "' have another shape than the captured model");
  const KvCache& cache = state.kv_cache();
  require(cache.num_layers() == c.num_layers && cache.num_kv_heads() == c.num_kv_heads &&
              cache.head_dim() == c.head_dim,
          "the sequence state has another shape than the captured model");
  require(rope_inv_freq.size() == as_size(c.head_dim / 2),
          "rope_inv_freq has " + std::to_string(rope_inv_freq.size()) + " entries, expected " +
              std::to_string(c.head_dim / 2));

  const std::size_t index = static_cast<std::size_t>(found - options_.boundaries.begin());
  const std::size_t b = as_size(boundary);
  const std::size_t dim = as_size(c.head_dim);
  std::vector<methods::LayerCapture> result(as_size(c.num_layers));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const BoundaryData& data = data_[as_size(layer)][index];
    methods::LayerCapture& view = result[as_size(layer)];
    view = unit::make_layer_capture(c, options_, layer, boundary,
                                    {data.window_rows,
                                     data.window_queries,
                                     data.column_sums,
                                     data.query_count,
                                     data.query_sum,
                                     data.query_outer,
                                     data.queries_prerope,
                                     data.queries,
                                     data.keys_prerope,
                                     {}},
                                    weights.layers[as_size(layer)].o_proj, rope_inv_freq);
    if (options_.attention_cosine) {
      require(attention_cosine_.size() == as_size(c.num_layers),
              "the attention cosine was observed for " + std::to_string(attention_cosine_.size()) +
                  " of " + std::to_string(c.num_layers) + " layers");
      view.attention_cosine = std::span<const float>(attention_cosine_[as_size(layer)]).first(b);
    }
    if (options_.attention_input) {
      require(attention_input_.size() == as_size(c.num_layers),
              "the attention input was observed for " + std::to_string(attention_input_.size()) +
                  " of " + std::to_string(c.num_layers) + " layers");
      view.attention_input = std::span<const float>(attention_input_[as_size(layer)])
                                 .first(b * as_size(c.hidden_size));
    }
    for (int g = 0; g < c.num_kv_heads; ++g) {
      const KvHeadView head = cache.head(layer, g);
      // The first b entries must be positions 0..b-1 (a prefilled, not yet evicted prefix).
      require(head.size() >= b && head.positions[b - 1] == boundary - 1,
              "layer " + std::to_string(layer) + ", kv head " + std::to_string(g) +
                  " of the sequence state does not hold positions 0.." +
                  std::to_string(boundary - 1));
      view.keys.push_back(head.keys.first(b * dim));
      view.values.push_back(head.values.first(b * dim));
    }
  }
  return result;
}

}  // namespace kvaudit::cpu
