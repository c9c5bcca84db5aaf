// Decode-time compression (kvpress DecodingPress semantics); see decoding_compression.h.
#include "runners/unit/decoding_compression.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/argmax.h"
#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::unit {
namespace {

bool is_eos(std::int32_t token, const GreedyOptions& options) {
  return std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) !=
         options.eos_token_ids.end();
}

// Routes row k of every layer view to the compressor of the k-th sequence of the step.
class StepRouter final : public DecodeObserver {
 public:
  explicit StepRouter(std::vector<DecodingCompressor*> rows) : rows_(std::move(rows)) {}
  void on_layer(const DecodeLayerView& view) override {
    if (view.num_sequences != static_cast<int>(rows_.size()))
      throw std::logic_error("decode-time compression: the engine's view has " +
                             std::to_string(view.num_sequences) + " rows for " +
                             std::to_string(rows_.size()) + " sequences");
    for (std::size_t k = 0; k < rows_.size(); ++k) rows_[k]->observe(view, static_cast<int>(k));
  }

 private:
  std::vector<DecodingCompressor*> rows_;
};

// The layer's entries per KV head; throws when the heads hold different numbers of entries.
std::vector<CacheHeadEntries> layer_heads(const SequenceCache& cache, int layer, int num_kv_heads) {
  std::vector<CacheHeadEntries> heads;
  for (int h = 0; h < num_kv_heads; ++h) heads.push_back(cache.head_entries(layer, h));
  const std::size_t k_len = heads.front().positions.size();
  for (int h = 1; h < num_kv_heads; ++h)
    if (heads[to_size(h)].positions.size() != k_len)
      throw std::invalid_argument(
          "decode-time compression: layer " + std::to_string(layer) + " KV head " +
          std::to_string(h) + " holds " + std::to_string(heads[to_size(h)].positions.size()) +
          " entries but head 0 holds " + std::to_string(k_len) +
          " (the scorer needs one length per layer; a head-adaptive prefill method cannot "
          "precede decode-time compression)");
  return heads;
}

}  // namespace

void validate(const DecodingPolicy& policy) {
  if (policy.compression_interval < 1)
    throw std::invalid_argument("decoding: compression_interval must be >= 1, got " +
                                std::to_string(policy.compression_interval));
  if (policy.target_size < 1)
    throw std::invalid_argument("decoding: target_size must be >= 1, got " +
                                std::to_string(policy.target_size));
  if (policy.hidden_states_buffer_size < 0)
    throw std::invalid_argument("decoding: hidden_states_buffer_size must be >= 0, got " +
                                std::to_string(policy.hidden_states_buffer_size));
  if (policy.merge_budget < 0)
    throw std::invalid_argument("decoding: merge_budget must be >= 0 (0 = no merging), got " +
                                std::to_string(policy.merge_budget));
  if (policy.target_compression_ratio) {
    const double r = *policy.target_compression_ratio;
    if (!(r >= 0.0 && r < 1.0))  // NaN fails too
      throw std::invalid_argument("decoding: target_compression_ratio must be in [0, 1), got " +
                                  std::to_string(r));
    if (policy.merge_budget > 0)
      throw std::invalid_argument(
          "decoding: target_compression_ratio cannot be combined with merge_budget (kvpress "
          "CAMPress compresses to a fixed target_size)");
  }
}

std::int64_t decoding_target_size(const DecodingPolicy& policy, std::int64_t total_tokens_seen) {
  if (!policy.target_compression_ratio) return policy.target_size;
  // Python: max(1, int(total_tokens_seen * (1 - r))) in double; int() truncates toward zero.
  const double kept =
      static_cast<double>(total_tokens_seen) * (1.0 - *policy.target_compression_ratio);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(kept));
}

double decoding_compression_ratio(std::int64_t k_len, std::int64_t target_size) {
  if (k_len <= target_size) return 0.0;
  const double q = static_cast<double>(k_len);
  const double target = static_cast<double>(target_size);
  double ratio = 1.0 - target / q;
  double low = 0.0, high = 1.0;
  // The same 20 steps as kvpress: int() truncates toward zero like the cast below.
  for (int iteration = 0; iteration < 20; ++iteration) {
    const auto n_kept = static_cast<std::int64_t>(q * (1.0 - ratio));
    if (n_kept == target_size) break;
    if (n_kept > target_size) {
      low = ratio;
      ratio = (ratio + high) / 2.0;
    } else {
      high = ratio;
      ratio = (low + ratio) / 2.0;
    }
  }
  return ratio;
}

DecodingCompressor::DecodingCompressor(const InferenceEngine& engine, const methods::Method& method,
                                       DecodingPolicy policy, methods::SelectionContext context,
                                       bool record_kept, MergeDrawRule merge_draw, DmsDecoding* dms)
    : engine_(engine),
      method_(method),
      policy_(policy),
      context_(context),
      record_kept_(record_kept),
      buffer_(to_size(engine.config().num_layers)),
      merge_draw_(std::move(merge_draw)),
      dms_(dms) {
  validate(policy_);
  context_.memo = nullptr;
  if (policy_.merge_budget > 0) {
    cam_scorer_ = dynamic_cast<const methods::ScorerMethod*>(&method_);
    cam_source_ = dynamic_cast<const CamScoreSource*>(&method_);
    if (cam_source_ != nullptr && !cam_source_->cam_capable()) cam_source_ = nullptr;
    if (cam_scorer_ == nullptr && cam_source_ == nullptr)
      throw std::invalid_argument("decode-time compression: CAM (merge_budget " +
                                  std::to_string(policy_.merge_budget) + ") needs a plain scorer " +
                                  "method as its base press, not " + method_.name());
    attention_sums_.resize(to_size(engine.config().num_layers));
    layer_counts_.assign(to_size(engine.config().num_layers), 0);
  }
}

void DecodingCompressor::observe(const DecodeLayerView& view, int row) {
  if (dms_ != nullptr) {
    dms_->observe(view, row);
    return;
  }
  const model::ModelConfig& c = engine_.config();
  const std::size_t q_width = to_size(c.num_heads) * to_size(c.head_dim);
  const std::size_t d = to_size(c.head_dim);
  if (view.layer < 0 || view.layer >= c.num_layers || row < 0 || row >= view.num_sequences ||
      view.queries_pre_rope.size() != to_size(view.num_sequences) * q_width ||
      view.rope_cos.size() != to_size(view.num_sequences) * d ||
      view.rope_sin.size() != to_size(view.num_sequences) * d)
    throw std::logic_error("decode-time compression: malformed decode layer view (layer " +
                           std::to_string(view.layer) + ", row " + std::to_string(row) + ")");
  const std::size_t r = to_size(row);
  BufferedRow buffered;
  buffered.queries_pre_rope.assign(
      view.queries_pre_rope.begin() + static_cast<std::ptrdiff_t>(r * q_width),
      view.queries_pre_rope.begin() + static_cast<std::ptrdiff_t>((r + 1) * q_width));
  buffered.cos.assign(view.rope_cos.begin() + static_cast<std::ptrdiff_t>(r * d),
                      view.rope_cos.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
  buffered.sin.assign(view.rope_sin.begin() + static_cast<std::ptrdiff_t>(r * d),
                      view.rope_sin.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
  if (view.layer == 0) {
    step_cos_ = buffered.cos;
    step_sin_ = buffered.sin;
  }
  buffer_[to_size(view.layer)].push_back(std::move(buffered));
}

std::optional<CompressionEvent> DecodingCompressor::end_step(SequenceCache& cache) {
  if (dms_ != nullptr) {
    ++decode_steps_;
    return dms_->end_step(cache);
  }
  if (policy_.merge_budget > 0) return end_step_cam(cache);
  ++decode_steps_;
  ++count_;
  std::optional<CompressionEvent> event;
  // kvpress DecodingPress.forward_hook: step count ≥ interval, or q_len (1 here) ≥ the target.
  const std::int64_t target = decoding_target_size(policy_, cache.original_length());
  if (count_ >= policy_.compression_interval || target <= 1) {
    event = compress(cache, target);
    count_ = 0;
    for (auto& rows : buffer_) rows.clear();
  }
  const std::size_t keep = to_size(policy_.hidden_states_buffer_size);
  for (auto& rows : buffer_)
    if (rows.size() > keep)
      rows.erase(rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(keep));
  return event;
}

std::vector<float> DecodingCompressor::window_queries(int layer, int rows) const {
  // q·cos + rotate_half(q)·sin with rotate_half(q) = [−q[d/2:], q[:d/2]], each product and the
  // sum rounded to bf16 in bf16 mode, as HF's apply_rotary_pos_emb and kvpress's
  // compute_window_attention compute it in the model dtype.
  const model::ModelConfig& c = engine_.config();
  const bool bf16 = c.dtype == model::ComputeDtype::bf16;
  const std::size_t H = to_size(c.num_heads), d = to_size(c.head_dim), half = d / 2;
  const auto& buffered = buffer_[to_size(layer)];
  const std::size_t first = buffered.size() - to_size(rows);
  std::vector<float> out(H * to_size(rows) * d);
  for (std::size_t r = 0; r < to_size(rows); ++r) {
    const BufferedRow& row = buffered[first + r];
    const bool own = policy_.query_positions == BufferedQueryPositions::own;
    const std::vector<float>& cos = own ? row.cos : step_cos_;
    const std::vector<float>& sin = own ? row.sin : step_sin_;
    for (std::size_t h = 0; h < H; ++h) {
      const float* q = row.queries_pre_rope.data() + h * d;
      float* o = out.data() + (h * to_size(rows) + r) * d;
      for (std::size_t i = 0; i < d; ++i) {
        const float rotated = i < half ? -q[i + half] : q[i - half];
        const float a = methods::maybe_bf16(q[i] * cos[i], bf16);
        const float b = methods::maybe_bf16(rotated * sin[i], bf16);
        o[i] = methods::maybe_bf16(a + b, bf16);
      }
    }
  }
  return out;
}

methods::LayerCapture DecodingCompressor::layer_view(int layer,
                                                     const std::vector<CacheHeadEntries>& heads,
                                                     std::vector<float>& queries) const {
  const model::ModelConfig& c = engine_.config();
  const std::size_t k_len = heads.front().positions.size();
  const int rows = static_cast<int>(std::min(buffer_[to_size(layer)].size(), k_len));
  queries = window_queries(layer, rows);
  methods::LayerCapture view = layer_capture_shape(c, layer, static_cast<int>(k_len));
  for (const CacheHeadEntries& e : heads) {
    view.keys.push_back(e.keys);
    view.values.push_back(e.values);
  }
  view.window_rows = rows;
  view.window_queries = queries;
  view.rope_inv_freq = engine_.rope_inv_freq();
  return view;
}

std::optional<CompressionEvent> DecodingCompressor::end_step_cam(SequenceCache& cache) {
  const auto start = std::chrono::steady_clock::now();
  ++decode_steps_;
  const model::ModelConfig& c = engine_.config();
  const bool bf16 = c.dtype == model::ComputeDtype::bf16;
  const std::size_t layers = to_size(c.num_layers);
  // kvpress's hook, per layer: accumulate the step's attention, count the step, maybe compress.
  std::vector<std::vector<CacheHeadEntries>> heads(layers);
  std::vector<bool> due(layers, false);
  bool any_due = false;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    auto& h = heads[to_size(layer)];
    h = layer_heads(cache, layer, c.num_kv_heads);
    if (buffer_[to_size(layer)].empty())
      throw std::logic_error("decode-time compression: layer " + std::to_string(layer) +
                             " was not observed this step");
    const std::vector<float> query = window_queries(layer, 1);  // the step's row, its position
    cam_accumulate(attention_sums_[to_size(layer)],
                   cam_step_attention(query, h, c.num_heads, c.head_dim, bf16), c.num_kv_heads,
                   bf16);
    ++layer_counts_[to_size(layer)];
    const auto n = static_cast<std::int64_t>(h.front().positions.size());
    due[to_size(layer)] = (layer_counts_[to_size(layer)] >= policy_.compression_interval &&
                           n > policy_.target_size) ||
                          policy_.target_size <= 1;
    any_due = any_due || due[to_size(layer)];
  }
  std::optional<CompressionEvent> result;
  if (any_due) {
    CompressionEvent event;
    event.decode_step = decode_steps_;
    event.original_length = cache.original_length();
    event.target_size = policy_.target_size;
    methods::Selection selection;
    selection.kept.resize(layers);
    for (int layer = 0; layer < c.num_layers; ++layer) {
      const auto& h = heads[to_size(layer)];
      auto& kept = selection.kept[to_size(layer)];
      const int n = static_cast<int>(h.front().positions.size());
      if (!due[to_size(layer)] || n <= policy_.target_size) {
        for (const CacheHeadEntries& e : h)
          kept.emplace_back(e.positions.begin(), e.positions.end());
        if (due[to_size(
                layer)]) {  // kvpress: compress() returns the cache untouched; the count resets
          layer_counts_[to_size(layer)] = 0;
          buffer_[to_size(layer)].clear();
        }
        continue;
      }
      std::vector<float> queries;
      const methods::LayerCapture view = layer_view(layer, h, queries);
      const double ratio = decoding_compression_ratio(n, policy_.target_size);
      const methods::Budget budget{.compression = ratio};
      const std::optional<std::vector<float>> scored =
          cam_scorer_ != nullptr
              ? methods::score_layer(cam_scorer_->scorer(), view, budget, context_)
              : cam_source_->cam_scores(view, budget, context_);
      if (!scored) {  // the guard recorded the failure: keep the layer whole
        for (const CacheHeadEntries& e : h)
          kept.emplace_back(e.positions.begin(), e.positions.end());
        layer_counts_[to_size(layer)] = 0;
        buffer_[to_size(layer)].clear();
        continue;
      }
      const std::vector<float>& scores = *scored;
      event.evicted = true;
      // torch's mean over KV heads: f32 sum, ÷ Hkv, in the scores' dtype. kvpress's scores are a
      // bf16 tensor in a bf16 model for some scorers (SnapKV) and f32 for others (KNorm since PR
      // #280); our scorers return bf16 values exactly where kvpress's are bf16, so the mean is
      // rounded to bf16 when every score is a bf16 value.
      const bool bf16_scores = bf16 && std::all_of(scores.begin(), scores.end(), [](float x) {
                                 return methods::round_to_bf16(x) == x || x != x;
                               });
      std::vector<float> mean(to_size(n), 0.0f);
      for (int j = 0; j < n; ++j) {
        float total = 0.0f;
        for (int g = 0; g < c.num_kv_heads; ++g)
          total += scores[to_size(g) * to_size(n) + to_size(j)];
        mean[to_size(j)] =
            methods::maybe_bf16(total / static_cast<float>(c.num_kv_heads), bf16_scores);
      }
      CamMergeInput input;
      input.mean_scores = mean;
      input.attention_sums = attention_sums_[to_size(layer)];
      for (const CacheHeadEntries& e : h) input.values.push_back(e.values);
      input.length = n;
      input.head_dim = c.head_dim;
      input.target_size = policy_.target_size;
      input.merge_budget = policy_.merge_budget;
      input.steps_since = layer_counts_[to_size(layer)];
      input.bf16 = bf16;
      const int hkv = c.num_kv_heads;
      const auto draw = [&](float p, int kv_head, int candidate) {
        if (merge_draw_) return merge_draw_(p);
        return cam_uniform(context_.seed, context_.cell_key, layer, decode_steps_,
                           static_cast<std::int64_t>(candidate) * hkv + kv_head) < p;
      };
      CamMergeResult merged = cam_merge(input, draw);
      event.merges += merged.merges;
      for (const CacheHeadEntries& e : h) {
        std::vector<std::int32_t> positions;
        positions.reserve(merged.kept.size());
        for (const std::int32_t index : merged.kept)
          positions.push_back(e.positions[to_size(index)]);
        kept.push_back(std::move(positions));
      }
      for (CamMergeResult::Row& row : merged.replacements)
        selection.value_replacements.push_back(
            {.layer = layer,
             .kv_head = row.kv_head,
             .position = h[to_size(row.kv_head)].positions[to_size(row.index)],
             .value = std::move(row.value)});
      // A keeps the kept indices in every head.
      std::vector<float>& sums = attention_sums_[to_size(layer)];
      std::vector<float> gathered;
      gathered.reserve(to_size(hkv) * merged.kept.size());
      for (int g = 0; g < hkv; ++g)
        for (const std::int32_t index : merged.kept)
          gathered.push_back(sums[to_size(g) * to_size(n) + to_size(index)]);
      sums = std::move(gathered);
      layer_counts_[to_size(layer)] = 0;
      buffer_[to_size(layer)].clear();
    }
    if (event.evicted) {
      cache.retain(selection);
      if (!selection.value_replacements.empty()) cache.replace_values(selection, bf16);
    }
    if (record_kept_) {
      event.kept = std::move(selection.kept);
      event.value_sums.resize(layers);
      for (int layer = 0; layer < c.num_layers; ++layer)
        for (int g = 0; g < c.num_kv_heads; ++g) {
          const CacheHeadEntries e = cache.head_entries(layer, g);
          std::vector<double> row_sums(e.positions.size(), 0.0);
          for (std::size_t i = 0; i < row_sums.size(); ++i)
            for (int k = 0; k < c.head_dim; ++k)
              row_sums[i] += e.values[i * to_size(c.head_dim) + to_size(k)];
          event.value_sums[to_size(layer)].push_back(std::move(row_sums));
        }
    }
    event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result = std::move(event);
  }
  const std::size_t keep = to_size(policy_.hidden_states_buffer_size);
  for (auto& rows : buffer_)
    if (rows.size() > keep)
      rows.erase(rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(keep));
  return result;
}

CompressionEvent DecodingCompressor::compress(SequenceCache& cache, std::int64_t target_size) {
  const auto start = std::chrono::steady_clock::now();
  const model::ModelConfig& c = engine_.config();
  CompressionEvent event;
  event.decode_step = decode_steps_;
  event.original_length = cache.original_length();
  event.target_size = target_size;
  methods::Selection selection;
  selection.kept.resize(to_size(c.num_layers));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const std::vector<CacheHeadEntries> heads = layer_heads(cache, layer, c.num_kv_heads);
    const std::size_t k_len = heads.front().positions.size();
    auto& kept = selection.kept[to_size(layer)];
    const double ratio = decoding_compression_ratio(static_cast<std::int64_t>(k_len), target_size);
    if (ratio == 0.0) {  // kvpress ScorerPress.compress returns the cache untouched
      for (const CacheHeadEntries& e : heads)
        kept.emplace_back(e.positions.begin(), e.positions.end());
      continue;
    }
    event.evicted = true;
    std::vector<float> queries;
    const methods::LayerCapture view = layer_view(layer, heads, queries);
    const methods::Selection chosen = method_.select(
        std::span<const methods::LayerCapture>(&view, 1), {.compression = ratio}, context_);
    if (chosen.kept.size() != 1 || chosen.kept.front().size() != heads.size())
      throw std::logic_error("decode-time compression: " + method_.name() +
                             " returned a selection of another shape");
    for (std::size_t h = 0; h < heads.size(); ++h) {
      std::vector<std::int32_t> positions;
      positions.reserve(chosen.kept.front()[h].size());
      for (const std::int32_t index : chosen.kept.front()[h])
        positions.push_back(heads[h].positions[to_size(index)]);
      kept.push_back(std::move(positions));
    }
  }
  if (event.evicted) cache.retain(selection);
  if (record_kept_) event.kept = std::move(selection.kept);
  event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return event;
}

std::vector<CompressingOutput> generate_greedy_compressing(
    InferenceEngine& engine, std::span<const CompressingSequence> sequences,
    const GreedyOptions& options, bool record_kept) {
  if (options.max_new_tokens < 0)
    throw std::invalid_argument("greedy generation: max_new_tokens must be >= 0, got " +
                                std::to_string(options.max_new_tokens));
  const std::size_t vocab = to_size(engine.config().vocab_size);
  std::vector<CompressingOutput> outputs(sequences.size());
  std::vector<DecodingCompressor> compressors;
  compressors.reserve(sequences.size());
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const CompressingSequence& s = sequences[i];
    if (s.cache == nullptr || s.method == nullptr)
      throw std::invalid_argument("decode-time compression: sequence " + std::to_string(i) +
                                  " has no cache or no method");
    if (s.last_logits.size() != vocab)
      throw std::invalid_argument("decode-time compression: sequence " + std::to_string(i) +
                                  " has " + std::to_string(s.last_logits.size()) +
                                  " logits, expected " + std::to_string(vocab));
    compressors.emplace_back(engine, *s.method, s.policy, s.context, record_kept, s.merge_draw,
                             s.dms);
    outputs[i].peak_kept_bytes = s.cache->kept_bytes();
  }
  // Appends `token`; true when the sequence is finished (greedy_decoding.h's rule).
  auto take = [&](std::size_t i, std::int32_t token) {
    GreedyOutput& g = outputs[i].greedy;
    g.tokens.push_back(token);
    if (is_eos(token, options)) {
      g.stopped_on_eos = true;
      return true;
    }
    return static_cast<int>(g.tokens.size()) >= options.max_new_tokens;
  };
  std::vector<std::size_t> active;
  std::vector<std::int32_t> next;
  if (options.max_new_tokens > 0) {
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      const std::int32_t token = argmax_token(sequences[i].last_logits);
      if (!take(i, token)) {
        active.push_back(i);
        next.push_back(token);
      }
    }
  }
  std::vector<double> step_shares(sequences.size(), 0.0);
  while (!active.empty()) {
    const auto step_start = std::chrono::steady_clock::now();
    std::vector<SequenceCache*> batch;
    std::vector<DecodingCompressor*> rows;
    for (std::size_t i : active) {
      batch.push_back(sequences[i].cache);
      rows.push_back(&compressors[i]);
    }
    StepRouter router(rows);
    const LogitMatrix logits = engine.decode_step_observed(batch, next, router);
    std::vector<std::size_t> still_active;
    std::vector<std::int32_t> still_next;
    for (std::size_t k = 0; k < active.size(); ++k) {
      const std::size_t i = active[k];
      const std::int32_t token = argmax_token(logits.row(static_cast<int>(k)));
      if (!take(i, token)) {
        still_active.push_back(i);
        still_next.push_back(token);
      }
    }
    add_step_share(
        step_shares, active,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    // Compression after the step's logits (kvpress's hook runs after each attention).
    for (std::size_t i : active) {
      CompressingOutput& out = outputs[i];
      out.peak_kept_bytes = std::max(out.peak_kept_bytes, sequences[i].cache->kept_bytes());
      if (auto event = compressors[i].end_step(*sequences[i].cache)) {
        out.compressions += event->evicted ? 1 : 0;
        out.compression_seconds += event->seconds;
        out.events.push_back(std::move(*event));
      }
    }
    active = std::move(still_active);
    next = std::move(still_next);
  }
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    outputs[i].greedy.decode_step_seconds = step_shares[i];
    outputs[i].final_kept_bytes = sequences[i].cache->kept_bytes();
  }
  return outputs;
}

}  // namespace kvaudit::unit
