// DmsDecoding (dms_decoding.h): kvpress DMSPress(decoding=True) after the prefill.
#include "runners/unit/dms_decoding.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "base/size_cast.h"
#include "methods/scorer_method.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::unit {
namespace {

// Collects each layer's new keys, values and attention input of an observed feed, per KV head.
class FeedRows final : public methods::PassObserver {
 public:
  struct Layer {
    std::vector<std::vector<float>> keys, values;  // [Hkv][T·d]
    std::vector<float> attention_input;            // [T·D]
    bool seen = false;
  };
  FeedRows(const model::ModelConfig& config, int tokens)
      : config_(config), tokens_(tokens), layers_(to_size(config.num_layers)) {}

  void on_layer(const methods::PassLayerView& view) override {
    const std::size_t hkv = to_size(config_.num_kv_heads), d = to_size(config_.head_dim);
    const std::size_t t = to_size(tokens_);
    if (view.layer < 0 || view.layer >= config_.num_layers || view.num_tokens != tokens_ ||
        view.keys.size() != t * hkv * d || view.values.size() != t * hkv * d ||
        view.attention_input.size() != t * to_size(config_.hidden_size))
      throw std::logic_error("dms decoding: malformed feed layer view (layer " +
                             std::to_string(view.layer) + ")");
    Layer& layer = layers_[to_size(view.layer)];
    layer.keys.assign(hkv, std::vector<float>(t * d));
    layer.values.assign(hkv, std::vector<float>(t * d));
    for (std::size_t row = 0; row < t; ++row)
      for (std::size_t h = 0; h < hkv; ++h)
        for (std::size_t i = 0; i < d; ++i) {
          layer.keys[h][row * d + i] = view.keys[(row * hkv + h) * d + i];
          layer.values[h][row * d + i] = view.values[(row * hkv + h) * d + i];
        }
    layer.attention_input.assign(view.attention_input.begin(), view.attention_input.end());
    layer.seen = true;
  }
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  const model::ModelConfig& config_;
  int tokens_;
  std::vector<Layer> layers_;
};

}  // namespace

DmsDecoding::DmsDecoding(const model::ModelConfig& config, const methods::DmsMethod& method,
                         double threshold, const methods::Selection& prefill, int boundary,
                         methods::SelectionContext context, bool record_kept)
    : config_(config),
      method_(method),
      threshold_(methods::dms_threshold(method.scorer(), threshold,
                                        config.dtype == model::ComputeDtype::bf16)),
      window_(to_size(method.sliding_window_size())),
      context_(context),
      record_kept_(record_kept),
      buffer_(to_size(config.num_layers)),
      step_input_(to_size(config.num_layers)),
      observed_(to_size(config.num_layers), false) {
  context_.memo = nullptr;
  if (!method.decoding())
    throw std::invalid_argument("dms decoding: the method was built without decoding = true");
  if (boundary < 1)
    throw std::invalid_argument("dms decoding: the boundary must be >= 1, got " +
                                std::to_string(boundary));
  const std::size_t held = std::min(to_size(boundary), window_);
  if (prefill.window_scores.size() != to_size(config.num_layers))
    throw std::invalid_argument("dms decoding: the prefill selection carries window scores for " +
                                std::to_string(prefill.window_scores.size()) + " layers, not " +
                                std::to_string(config.num_layers));
  for (std::size_t layer = 0; layer < buffer_.size(); ++layer) {
    const auto& heads = prefill.window_scores[layer];
    if (heads.size() != to_size(config.num_kv_heads))
      throw std::invalid_argument("dms decoding: layer " + std::to_string(layer) +
                                  "'s window scores have " + std::to_string(heads.size()) +
                                  " KV heads");
    for (const auto& scores : heads)
      if (scores.size() != held)
        throw std::invalid_argument("dms decoding: layer " + std::to_string(layer) + " holds " +
                                    std::to_string(scores.size()) + " window scores, not " +
                                    std::to_string(held) + " (min(L, w))");
    for (std::size_t j = 0; j < held; ++j) {
      Scored entry;
      entry.position = static_cast<std::int32_t>(to_size(boundary) - held + j);
      for (const auto& scores : heads) entry.scores.push_back(scores[j]);
      buffer_[layer].push_back(std::move(entry));
    }
  }
}

void DmsDecoding::push(int layer, std::span<const std::int32_t> positions,
                       const std::vector<std::vector<float>>& keys,
                       const std::vector<std::vector<float>>& values,
                       std::span<const float> attention_input) {
  const int count = static_cast<int>(positions.size());
  methods::LayerCapture view = layer_capture_shape(config_, layer, count);
  for (std::size_t h = 0; h < keys.size(); ++h) {
    view.keys.push_back(keys[h]);
    view.values.push_back(values[h]);
  }
  view.attention_input = attention_input;
  // kvpress scores the new entries alone: press.score(module, hidden_states, keys[:, :, -q:], …).
  const std::vector<float> scores =
      methods::score_layer(method_.scorer(), view, methods::Budget{}, context_);
  for (int j = 0; j < count; ++j) {
    Scored entry;
    entry.position = positions[to_size(j)];
    for (std::size_t h = 0; h < keys.size(); ++h)
      entry.scores.push_back(scores[h * to_size(count) + to_size(j)]);
    buffer_[to_size(layer)].push_back(std::move(entry));
  }
}

CompressionEvent DmsDecoding::evict(SequenceCache& cache, int decode_step) {
  CompressionEvent event;
  event.decode_step = decode_step;
  event.original_length = cache.original_length();
  const std::size_t layers = to_size(config_.num_layers), hkv = to_size(config_.num_kv_heads);
  std::vector<std::vector<std::vector<std::int32_t>>> removed(
      layers, std::vector<std::vector<std::int32_t>>(hkv));
  for (std::size_t layer = 0; layer < layers; ++layer) {
    auto& buffer = buffer_[layer];
    while (buffer.size() > window_) {
      const Scored& oldest = buffer.front();
      for (std::size_t h = 0; h < hkv; ++h)
        if (methods::dms_evicts(oldest.scores[h], threshold_)) {
          removed[layer][h].push_back(oldest.position);
          event.evicted = true;
        }
      buffer.pop_front();
    }
  }
  methods::Selection selection;
  if (event.evicted || record_kept_) {
    selection.kept.resize(layers);
    for (std::size_t layer = 0; layer < layers; ++layer)
      for (std::size_t h = 0; h < hkv; ++h) {
        const CacheHeadEntries e = cache.head_entries(static_cast<int>(layer), static_cast<int>(h));
        const auto& gone = removed[layer][h];  // ascending: the buffer is in position order
        std::vector<std::int32_t> kept;
        kept.reserve(e.positions.size());
        std::set_difference(e.positions.begin(), e.positions.end(), gone.begin(), gone.end(),
                            std::back_inserter(kept));
        if (kept.size() + gone.size() != e.positions.size())
          throw std::logic_error("dms decoding: layer " + std::to_string(layer) + " head " +
                                 std::to_string(h) + " does not hold an entry it evicts");
        selection.kept[layer].push_back(std::move(kept));
      }
  }
  if (event.evicted) cache.retain(selection);
  if (record_kept_) {
    event.kept = std::move(selection.kept);
    event.removed = std::move(removed);
  }
  return event;
}

LogitMatrix DmsDecoding::feed(InferenceEngine& engine, SequenceCache& cache,
                              std::span<const std::int32_t> tokens,
                              std::optional<CompressionEvent>& event) {
  event.reset();
  const std::int64_t first = cache.original_length();
  FeedRows rows(config_, static_cast<int>(tokens.size()));
  LogitMatrix logits = engine.observed_prefill(cache, tokens, LogitRows::last, rows);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::int32_t> positions(tokens.size());
  for (std::size_t j = 0; j < positions.size(); ++j)
    positions[j] = static_cast<std::int32_t>(first + static_cast<std::int64_t>(j));
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const FeedRows::Layer& fed = rows.layers()[to_size(layer)];
    if (!fed.seen)
      throw std::logic_error("dms decoding: the feed did not observe layer " +
                             std::to_string(layer));
    push(layer, positions, fed.keys, fed.values, fed.attention_input);
  }
  CompressionEvent done = evict(cache, 0);
  done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (done.evicted || record_kept_) event = std::move(done);
  return logits;
}

void DmsDecoding::observe(const DecodeLayerView& view, int row) {
  const std::size_t D = to_size(config_.hidden_size);
  if (view.layer < 0 || view.layer >= config_.num_layers || row < 0 || row >= view.num_sequences ||
      view.attention_input.size() != to_size(view.num_sequences) * D ||
      view.positions.size() != to_size(view.num_sequences))
    throw std::logic_error("dms decoding: malformed decode layer view (layer " +
                           std::to_string(view.layer) + ", row " + std::to_string(row) + ")");
  const auto begin = view.attention_input.begin() + static_cast<std::ptrdiff_t>(to_size(row) * D);
  step_input_[to_size(view.layer)].assign(begin, begin + static_cast<std::ptrdiff_t>(D));
  observed_[to_size(view.layer)] = true;
  step_position_ = view.positions[to_size(row)];
}

std::optional<CompressionEvent> DmsDecoding::end_step(SequenceCache& cache) {
  const auto start = std::chrono::steady_clock::now();
  ++decode_steps_;
  const std::size_t d = to_size(config_.head_dim);
  const std::int32_t position[] = {step_position_};
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    if (!observed_[to_size(layer)])
      throw std::logic_error("dms decoding: layer " + std::to_string(layer) +
                             " was not observed this step");
    observed_[to_size(layer)] = false;
    std::vector<std::vector<float>> keys, values;
    for (int h = 0; h < config_.num_kv_heads; ++h) {
      const CacheHeadEntries e = cache.head_entries(layer, h);
      if (e.positions.empty() || e.positions.back() != step_position_)
        throw std::logic_error("dms decoding: layer " + std::to_string(layer) + " head " +
                               std::to_string(h) + "'s last entry is not the step's token");
      keys.emplace_back(e.keys.end() - static_cast<std::ptrdiff_t>(d), e.keys.end());
      values.emplace_back(e.values.end() - static_cast<std::ptrdiff_t>(d), e.values.end());
    }
    push(layer, position, keys, values, step_input_[to_size(layer)]);
  }
  CompressionEvent event = evict(cache, decode_steps_);
  event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!event.evicted && !record_kept_) return std::nullopt;
  return event;
}

}  // namespace kvaudit::unit
