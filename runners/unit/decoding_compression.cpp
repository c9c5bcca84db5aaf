// Decode-time compression (kvpress DecodingPress semantics); see decoding_compression.h.
#include "runners/unit/decoding_compression.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/argmax.h"
#include "methods/bf16_rounding.h"
#include "runners/unit/cost_shares.h"

namespace kvaudit::unit {
namespace {

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

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
                                       bool record_kept)
    : engine_(engine),
      method_(method),
      policy_(policy),
      context_(context),
      record_kept_(record_kept),
      buffer_(sz(engine.config().num_layers)) {
  validate(policy_);
  context_.memo = nullptr;
}

void DecodingCompressor::observe(const DecodeLayerView& view, int row) {
  const model::ModelConfig& c = engine_.config();
  const std::size_t q_width = sz(c.num_heads) * sz(c.head_dim);
  const std::size_t d = sz(c.head_dim);
  if (view.layer < 0 || view.layer >= c.num_layers || row < 0 || row >= view.num_sequences ||
      view.queries_pre_rope.size() != sz(view.num_sequences) * q_width ||
      view.rope_cos.size() != sz(view.num_sequences) * d ||
      view.rope_sin.size() != sz(view.num_sequences) * d)
    throw std::logic_error("decode-time compression: malformed decode layer view (layer " +
                           std::to_string(view.layer) + ", row " + std::to_string(row) + ")");
  const std::size_t r = sz(row);
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
  buffer_[sz(view.layer)].push_back(std::move(buffered));
}

std::optional<CompressionEvent> DecodingCompressor::end_step(SequenceCache& cache) {
  ++decode_steps_;
  ++count_;
  std::optional<CompressionEvent> event;
  if (count_ >= policy_.compression_interval) {
    event = compress(cache);
    count_ = 0;
    for (auto& rows : buffer_) rows.clear();
  }
  const std::size_t keep = sz(policy_.hidden_states_buffer_size);
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
  const std::size_t H = sz(c.num_heads), d = sz(c.head_dim), half = d / 2;
  const auto& buffered = buffer_[sz(layer)];
  const std::size_t first = buffered.size() - sz(rows);
  std::vector<float> out(H * sz(rows) * d);
  for (std::size_t r = 0; r < sz(rows); ++r) {
    const BufferedRow& row = buffered[first + r];
    const bool own = policy_.query_positions == BufferedQueryPositions::own;
    const std::vector<float>& cos = own ? row.cos : step_cos_;
    const std::vector<float>& sin = own ? row.sin : step_sin_;
    for (std::size_t h = 0; h < H; ++h) {
      const float* q = row.queries_pre_rope.data() + h * d;
      float* o = out.data() + (h * sz(rows) + r) * d;
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

CompressionEvent DecodingCompressor::compress(SequenceCache& cache) {
  const auto start = std::chrono::steady_clock::now();
  const model::ModelConfig& c = engine_.config();
  CompressionEvent event;
  event.decode_step = decode_steps_;
  event.original_length = cache.original_length();
  methods::Selection selection;
  selection.kept.resize(sz(c.num_layers));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    std::vector<CacheHeadEntries> heads;
    for (int h = 0; h < c.num_kv_heads; ++h) heads.push_back(cache.head_entries(layer, h));
    const std::size_t k_len = heads.front().positions.size();
    for (int h = 1; h < c.num_kv_heads; ++h)
      if (heads[sz(h)].positions.size() != k_len)
        throw std::invalid_argument(
            "decode-time compression: layer " + std::to_string(layer) + " KV head " +
            std::to_string(h) + " holds " + std::to_string(heads[sz(h)].positions.size()) +
            " entries but head 0 holds " + std::to_string(k_len) +
            " (the scorer needs one length per layer; a head-adaptive prefill method cannot "
            "precede decode-time compression)");
    auto& kept = selection.kept[sz(layer)];
    const double ratio =
        decoding_compression_ratio(static_cast<std::int64_t>(k_len), policy_.target_size);
    if (ratio == 0.0) {  // kvpress ScorerPress.compress returns the cache untouched
      for (const CacheHeadEntries& e : heads)
        kept.emplace_back(e.positions.begin(), e.positions.end());
      continue;
    }
    event.evicted = true;
    const int rows = static_cast<int>(std::min(buffer_[sz(layer)].size(), k_len));
    const std::vector<float> queries = window_queries(layer, rows);
    methods::LayerCapture view;
    view.layer = layer;
    view.num_layers = c.num_layers;
    view.num_heads = c.num_heads;
    view.num_kv_heads = c.num_kv_heads;
    view.head_dim = c.head_dim;
    view.hidden_size = c.hidden_size;
    view.length = static_cast<int>(k_len);
    view.model_is_bf16 = c.dtype == model::ComputeDtype::bf16;
    for (const CacheHeadEntries& e : heads) {
      view.keys.push_back(e.keys);
      view.values.push_back(e.values);
    }
    view.window_rows = rows;
    view.window_queries = queries;
    view.rope_inv_freq = engine_.rope_inv_freq();
    const methods::Selection chosen = method_.select(
        std::span<const methods::LayerCapture>(&view, 1), {.compression = ratio}, context_);
    if (chosen.kept.size() != 1 || chosen.kept.front().size() != heads.size())
      throw std::logic_error("decode-time compression: " + method_.name() +
                             " returned a selection of another shape");
    for (std::size_t h = 0; h < heads.size(); ++h) {
      std::vector<std::int32_t> positions;
      positions.reserve(chosen.kept.front()[h].size());
      for (const std::int32_t index : chosen.kept.front()[h])
        positions.push_back(heads[h].positions[sz(index)]);
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
  const std::size_t vocab = sz(engine.config().vocab_size);
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
    compressors.emplace_back(engine, *s.method, s.policy, s.context, record_kept);
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
