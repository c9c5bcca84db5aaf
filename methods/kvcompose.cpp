// KvcomposeMethod (kvcompose.h): the repeated-context pass's aggregated attention, the composite
// scores and the structured / unstructured selection.
#include "methods/kvcompose.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/top_k.h"

namespace kvaudit::methods {
namespace {

// kvpress adds this to the scores of the first keep_token_lower_bound ranks (in f32).
constexpr float kLowerBoundBoost = 1e9f;

const char* aggregation_name(KvcomposeAggregation aggregation) {
  return aggregation == KvcomposeAggregation::max ? "max" : "mean";
}

// x·y over d elements, accumulated in double, returned as f32 (a BLAS dot up to f32 rounding).
float key_dot(const float* x, const float* y, int d) {
  double sum = 0.0;
  for (int i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return static_cast<float>(sum);
}

// kvpress's aggregators over a sequence of equally long f32 vectors: max keeps the elementwise
// maximum (from −inf); mean adds them in order in f32 and divides by their count.
class Aggregate {
 public:
  Aggregate(KvcomposeAggregation kind, std::size_t n)
      : kind_(kind),
        data_(n,
              kind == KvcomposeAggregation::max ? -std::numeric_limits<float>::infinity() : 0.0f) {}
  void add(std::span<const float> x) {
    for (std::size_t i = 0; i < data_.size(); ++i)
      data_[i] = kind_ == KvcomposeAggregation::max ? std::max(data_[i], x[i]) : data_[i] + x[i];
    ++count_;
  }
  // The aggregate, written to `out`.
  void result(std::span<float> out) const {
    for (std::size_t i = 0; i < data_.size(); ++i)
      out[i] =
          kind_ == KvcomposeAggregation::max ? data_[i] : data_[i] / static_cast<float>(count_);
  }

 private:
  KvcomposeAggregation kind_;
  std::vector<float> data_;
  int count_ = 0;
};

}  // namespace

KvcomposeMethod::KvcomposeMethod(KvcomposeParams params) : params_(params) {
  if (params_.keep_token_lower_bound < 0)
    throw std::invalid_argument("kvcompose: keep_token_lower_bound must be >= 0");
}

std::string KvcomposeMethod::pass_key() const {
  return std::string("kvcompose: repeated context; agg_task=") +
         aggregation_name(params_.agg_task) + "; agg_group=" + aggregation_name(params_.agg_group);
}

std::vector<PassChunk> KvcomposeMethod::chunks(std::span<const std::int32_t> cached_tokens,
                                               const PassPrompt& prompt) const {
  (void)prompt;  // the task prompt is the cached tokens themselves
  if (cached_tokens.empty()) return {};
  PassChunk chunk;
  chunk.tokens.assign(cached_tokens.begin(), cached_tokens.end());
  chunk.first = 0;
  chunk.end = static_cast<int>(cached_tokens.size());
  return {std::move(chunk)};
}

void KvcomposeMethod::observe(const LayerCapture& cached, const PassChunk& chunk,
                              const PassLayerView& rows, ExtraPassResult& result) const {
  const bool bf16 = cached.model_is_bf16;
  const int heads = cached.num_heads, kv_heads = cached.num_kv_heads, d = cached.head_dim;
  const int group = cached.group_size();
  const int length = cached.length;  // b: the cached columns
  const int rows_count = rows.num_tokens;
  if (chunk.first != 0 || chunk.end != length || rows_count < 1 ||
      rows.queries.size() != to_size(rows_count) * to_size(heads) * to_size(d) ||
      rows.keys.size() != to_size(rows_count) * to_size(kv_heads) * to_size(d) ||
      cached.keys.size() != to_size(kv_heads) || result.length != length || cached.layer < 0 ||
      cached.layer >= result.num_layers || result.num_kv_heads != kv_heads) {
    throw std::invalid_argument("kvcompose: the repeated-context pass's rows of layer " +
                                std::to_string(cached.layer) + " do not match the capture");
  }
  // HF's scaling: head_dim ** -0.5 (a Python float), applied in f32 to the (bf16) scores.
  const float scale = static_cast<float>(std::pow(static_cast<double>(d), -0.5));
  const auto key_row = [&](int kv_head, int c) -> const float* {
    if (c < length) return cached.keys[to_size(kv_head)].data() + to_size(c) * to_size(d);
    return rows.keys.data() +
           (to_size(c - length) * to_size(kv_heads) + to_size(kv_head)) * to_size(d);
  };

  // Task aggregation per query head: A_h(j) over the pass's rows (heads in parallel, each writing
  // only its own row of `task`).
  std::vector<float> task(to_size(heads) * to_size(length));
  const bool task_max = params_.agg_task == KvcomposeAggregation::max;
#pragma omp parallel for schedule(dynamic, 1) if (heads > 1 && rows_count * length > 4096)
  for (int h = 0; h < heads; ++h) {
    const int g = h / group;
    std::vector<float> weights(to_size(length + rows_count));
    std::vector<float> best(to_size(length), -std::numeric_limits<float>::infinity());
    std::vector<double> sums(to_size(length), 0.0);
    for (int t = 0; t < rows_count; ++t) {
      const float* q =
          rows.queries.data() + (to_size(t) * to_size(heads) + to_size(h)) * to_size(d);
      const int visible = length + t + 1;  // the cached keys and the pass's keys up to row t
      float top = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < visible; ++c) {
        const float s = maybe_bf16(maybe_bf16(key_dot(q, key_row(g, c), d), bf16) * scale, bf16);
        weights[to_size(c)] = s;
        top = std::max(top, s);
      }
      double sum = 0.0;
      for (int c = 0; c < visible; ++c) {
        const float e = std::exp(weights[to_size(c)] - top);
        weights[to_size(c)] = e;
        sum += static_cast<double>(e);
      }
      const float inverse_sum = 1.0f / static_cast<float>(sum);
      for (int j = 0; j < length; ++j) {
        const float a = maybe_bf16(weights[to_size(j)] * inverse_sum, bf16);
        best[to_size(j)] = std::max(best[to_size(j)], a);
        sums[to_size(j)] += static_cast<double>(a);
      }
    }
    // mean: the bf16 tensor's sum over rows is rounded to bf16, its count too (ones summed in
    // bf16); the division is f32.
    const float count = maybe_bf16(static_cast<float>(rows_count), bf16);
    float* out = task.data() + to_size(h) * to_size(length);
    for (int j = 0; j < length; ++j) {
      out[j] = task_max ? best[to_size(j)]
                        : maybe_bf16(static_cast<float>(sums[to_size(j)]), bf16) / count;
    }
  }
  // Group aggregation over the query heads of each KV head, in head order.
  std::vector<float> group_scores(to_size(length));
  for (int g = 0; g < kv_heads; ++g) {
    Aggregate aggregate(params_.agg_group, to_size(length));
    for (int h = g * group; h < (g + 1) * group; ++h)
      aggregate.add(
          std::span<const float>(task).subspan(to_size(h) * to_size(length), to_size(length)));
    aggregate.result(group_scores);
    for (int j = 0; j < length; ++j) result.at(cached.layer, g, j) = group_scores[to_size(j)];
  }
}

std::vector<float> KvcomposeMethod::token_scores(const ExtraPassResult& pass,
                                                 std::span<const LayerCapture> layers) const {
  const int n_layers = pass.num_layers, kv_heads = pass.num_kv_heads, length = pass.length;
  std::vector<float> scores = pass.scores;
  for (int l = 0; l < n_layers; ++l) {
    const LayerCapture& layer = layers[to_size(l)];
    float* base = scores.data() + to_size(l) * to_size(kv_heads) * to_size(length);
    if (params_.add_v_norm) {
      const int d = layer.head_dim;
      for (int g = 0; g < kv_heads; ++g) {
        for (int j = 0; j < length; ++j) {
          const float* v = layer.values[to_size(g)].data() + to_size(j) * to_size(d);
          double squares = 0.0;
          for (int e = 0; e < d; ++e) squares += static_cast<double>(v[e]) * v[e];
          const float norm =
              maybe_bf16(static_cast<float>(std::sqrt(squares)), layer.model_is_bf16);
          base[to_size(g) * to_size(length) + to_size(j)] *= norm;
        }
      }
    }
    if (params_.add_mean_across_heads) {
      for (int j = 0; j < length; ++j) {
        float sum = 0.0f;
        for (int g = 0; g < kv_heads; ++g) sum += base[to_size(g) * to_size(length) + to_size(j)];
        const float mean = sum / static_cast<float>(kv_heads);
        for (int g = 0; g < kv_heads; ++g) base[to_size(g) * to_size(length) + to_size(j)] += mean;
      }
    }
  }
  return scores;
}

KvcomposeCounts KvcomposeMethod::counts(std::span<const float> scores, int n_layers, int kv_heads,
                                        int length, double compression) const {
  const std::size_t per_head = to_size(length);
  const std::size_t bound =
      std::min(to_size(params_.keep_token_lower_bound), per_head);  // ranks that get +1e9
  // σ_{ℓ,g}: each head's scores, descending.
  std::vector<float> sorted(scores.begin(), scores.end());
  for (std::size_t row = 0; row < to_size(n_layers) * to_size(kv_heads); ++row)
    std::sort(sorted.begin() + static_cast<std::ptrdiff_t>(row * per_head),
              sorted.begin() + static_cast<std::ptrdiff_t>((row + 1) * per_head),
              std::greater<float>());
  // C_ℓ(r): agg_head over the heads' sorted scores (before their +1e9), then +1e9, then row 0
  // takes the maximum over layers.
  std::vector<float> composite(to_size(n_layers) * per_head);
  for (int l = 0; l < n_layers; ++l) {
    Aggregate aggregate(params_.agg_head, per_head);
    for (int g = 0; g < kv_heads; ++g)
      aggregate.add(std::span<const float>(sorted).subspan(
          (to_size(l) * to_size(kv_heads) + to_size(g)) * per_head, per_head));
    const std::span<float> row =
        std::span<float>(composite).subspan(to_size(l) * per_head, per_head);
    aggregate.result(row);
    for (std::size_t r = 0; r < bound; ++r) row[r] += kLowerBoundBoost;
  }
  for (int l = 1; l < n_layers; ++l)
    for (std::size_t r = 0; r < per_head; ++r)
      composite[r] = std::max(composite[r], composite[to_size(l) * per_head + r]);
  for (std::size_t row = 0; row < to_size(n_layers) * to_size(kv_heads); ++row)
    for (std::size_t r = 0; r < bound; ++r) sorted[row * per_head + r] += kLowerBoundBoost;

  KvcomposeCounts out;
  out.per_head.assign(to_size(n_layers), std::vector<std::int64_t>(to_size(kv_heads), 0));
  const std::int64_t n_head = kept_count(static_cast<std::int64_t>(sorted.size()), compression);
  for (const std::int64_t flat : torch_top_k_ranked(sorted, n_head)) {
    const std::size_t bin = to_size(flat) / per_head;
    ++out.per_head[bin / to_size(kv_heads)][bin % to_size(kv_heads)];
  }
  out.per_layer.assign(to_size(n_layers), 0);
  const std::int64_t n_layer = kept_count(static_cast<std::int64_t>(composite.size()), compression);
  for (const std::int64_t flat : torch_top_k_ranked(composite, n_layer))
    ++out.per_layer[to_size(flat) / per_head];
  const std::int64_t floor = std::max<std::int64_t>(1, params_.keep_token_lower_bound);
  for (std::int64_t& count : out.per_layer) count = std::max(count, floor);
  return out;
}

Selection KvcomposeMethod::select_from_scores(std::span<const float> scores, int n_layers,
                                              int kv_heads, int length, double compression) const {
  const KvcomposeCounts kept_counts = counts(scores, n_layers, kv_heads, length, compression);
  Selection selection;
  selection.kept.assign(to_size(n_layers),
                        std::vector<std::vector<std::int32_t>>(to_size(kv_heads)));
  for (int l = 0; l < n_layers; ++l) {
    for (int g = 0; g < kv_heads; ++g) {
      const std::int64_t count = params_.structured ? kept_counts.per_layer[to_size(l)]
                                                    : kept_counts.per_head[to_size(l)][to_size(g)];
      const std::span<const float> head = scores.subspan(
          (to_size(l) * to_size(kv_heads) + to_size(g)) * to_size(length), to_size(length));
      selection.kept[to_size(l)][to_size(g)] =
          torch_top_k_positions(head, std::min<std::int64_t>(count, length));
    }
  }
  return selection;
}

Selection KvcomposeMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                  const SelectionContext& context) const {
  const int length = check_layers(layers, name());
  const ExtraPassResult* pass = context.extra_pass;
  if (pass == nullptr) {
    throw std::invalid_argument(
        "kvcompose: no repeated-context pass result (the unit runner runs the method's extra "
        "pass before select)");
  }
  if (pass->num_layers != static_cast<int>(layers.size()) ||
      pass->num_kv_heads != layers.front().num_kv_heads || pass->length != length ||
      pass->scores.size() !=
          to_size(pass->num_layers) * to_size(pass->num_kv_heads) * to_size(pass->length)) {
    throw std::invalid_argument("kvcompose: the repeated-context pass result has another shape");
  }
  if (!(budget.compression >= 0.0 && budget.compression < 1.0)) {
    throw std::invalid_argument("kvcompose: compression " + std::to_string(budget.compression) +
                                " is outside [0, 1)");
  }
  const std::vector<float> scores = token_scores(*pass, layers);
  return select_from_scores(scores, pass->num_layers, pass->num_kv_heads, length,
                            budget.compression);
}

}  // namespace kvaudit::methods
