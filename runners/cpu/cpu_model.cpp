// The CPU forward pass (prefill, batched prefill, batched decode); see cpu_model.h.
//
// One forward call stacks the new tokens of all its sequences into R rows. Per decoder layer
// (HF LlamaDecoderLayer / Qwen2DecoderLayer; docs/design/numerics.md):
//   h = rms_norm(x); q, k, v = linear(h) (+bias); RoPE(q, k); append k, v to each sequence's cache;
//   a = attention per sequence over its own cache; x = x + linear_o(a)
//   h = rms_norm(x); x = x + down(silu(gate(h)) · up(h))
// then final rms_norm and lm_head on the rows that need logits.
#include "runners/cpu/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "runners/cpu/attention.h"
#include "runners/cpu/attention_output_gradients.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "runners/cpu/elementwise.h"
#include "runners/cpu/embedding.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/linear_bf16.h"
#include "runners/cpu/lora.h"
#include "runners/cpu/rms_norm.h"
#include "runners/cpu/rope.h"
#include "runners/model/model_error.h"
#include "runners/model/rope_tables.h"
#include "runners/model/weight_validation.h"

namespace kvaudit::cpu {
namespace {

// Rows of the sdpa backend per task (any value gives the same result).
constexpr std::size_t kSdpaRowsPerTask = 64;

std::span<float> rows_of(std::vector<float>& buffer, std::size_t first_row, std::size_t count,
                         std::size_t width) {
  return std::span<float>(buffer).subspan(first_row * width, count * width);
}

}  // namespace

CpuModel::CpuModel(const model::ModelWeights& weights, AttentionBackend backend,
                   CpuModelOptions options)
    : weights_(weights),
      backend_(backend),
      options_(options),
      rounding_(rounding_for(weights.config.dtype)) {
  model::validate_model_weights(weights_);
  if (options_.eager_query_chunk <= 0 || options_.sdpa_key_block <= 0) {
    throw std::invalid_argument(
        "CpuModelOptions: eager_query_chunk and sdpa_key_block must be >= 1");
  }
  inv_freq_ = model::rope_inv_freq(weights_.config.rope, weights_.config.head_dim);
  const model::ModelConfig& c = weights_.config;
  const int q_width = c.num_heads * c.head_dim;
  const int kv_width = c.num_kv_heads * c.head_dim;
  const std::string output_name =
      weights_.source +
      (weights_.lm_head.empty() ? ": embed_tokens (tied output projection)" : ": lm_head");
  // Packs every projection of every layer once, as Packed (PackedBf16Weight or PackedF32Weight).
  const auto pack_all = [&]<class Packed>(std::vector<PackedLayer<Packed>>& layers,
                                          Packed& output) {
    const auto pack = [&](const std::vector<float>& weight, int out, int in, int layer,
                          const char* tensor) {
      return Packed(weight, out, in,
                    weights_.source + ": layer " + std::to_string(layer) + " " + tensor);
    };
    layers.clear();
    layers.reserve(weights_.layers.size());
    for (int layer = 0; layer < c.num_layers; ++layer) {
      const model::LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
      layers.push_back(
          {.q = pack(w.q_proj, q_width, c.hidden_size, layer, "q_proj"),
           .k = pack(w.k_proj, kv_width, c.hidden_size, layer, "k_proj"),
           .v = pack(w.v_proj, kv_width, c.hidden_size, layer, "v_proj"),
           .o = pack(w.o_proj, c.hidden_size, q_width, layer, "o_proj"),
           .gate = pack(w.gate_proj, c.intermediate_size, c.hidden_size, layer, "gate_proj"),
           .up = pack(w.up_proj, c.intermediate_size, c.hidden_size, layer, "up_proj"),
           .down = pack(w.down_proj, c.hidden_size, c.intermediate_size, layer, "down_proj")});
    }
    output = Packed(weights_.output_projection(), c.vocab_size, c.hidden_size, output_name);
  };
  if (rounding_ == Rounding::bf16) {
    pack_all(packed_layers_, packed_output_);
  } else {
    pack_all(packed_f32_layers_, packed_f32_output_);
  }
}

SequenceState CpuModel::new_sequence() const {
  const model::ModelConfig& c = config();
  const std::size_t element_bytes = c.dtype == model::ComputeDtype::bf16 ? 2 : 4;
  return SequenceState(KvCache(c.num_layers, c.num_kv_heads, c.head_dim, element_bytes));
}

LogitMatrix CpuModel::prefill(SequenceState& state, std::span<const std::int32_t> tokens,
                              LogitRows rows, PrefillObserver* observer) {
  SequenceState* const states[] = {&state};
  const std::span<const std::int32_t> token_lists[] = {tokens};
  return std::move(forward(states, token_lists, rows, observer).front());
}

std::vector<LogitMatrix> CpuModel::prefill_batch(
    std::span<SequenceState* const> states, std::span<const std::span<const std::int32_t>> tokens,
    LogitRows rows) {
  return forward(states, tokens, rows, nullptr);
}

LogitMatrix CpuModel::decode_step(std::span<SequenceState* const> batch,
                                  std::span<const std::int32_t> tokens) {
  return observed_decode(batch, tokens, nullptr);
}

LogitMatrix CpuModel::observed_decode(std::span<SequenceState* const> batch,
                                      std::span<const std::int32_t> tokens,
                                      PrefillObserver* observer) const {
  if (tokens.size() != batch.size()) {
    throw std::invalid_argument("decode_step: " + std::to_string(batch.size()) + " sequences but " +
                                std::to_string(tokens.size()) + " tokens");
  }
  std::vector<std::span<const std::int32_t>> token_lists;
  token_lists.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) token_lists.push_back(tokens.subspan(i, 1));
  std::vector<LogitMatrix> per_sequence = forward(batch, token_lists, LogitRows::last, observer);
  LogitMatrix logits;
  logits.rows = static_cast<int>(batch.size());
  logits.vocab = config().vocab_size;
  logits.values.reserve(batch.size() * static_cast<std::size_t>(logits.vocab));
  for (const LogitMatrix& m : per_sequence) {
    logits.values.insert(logits.values.end(), m.values.begin(), m.values.end());
  }
  return logits;
}

std::unique_ptr<unit::SequenceCache> CpuModel::new_cache(std::int64_t capacity) {
  (void)capacity;  // a CPU cache grows as tokens arrive
  return std::make_unique<SequenceState>(new_sequence());
}

std::unique_ptr<unit::PrefillCapture> CpuModel::new_capture(unit::CaptureOptions options) {
  return std::make_unique<CpuPrefillCapture>(config(), std::move(options));
}

LogitMatrix CpuModel::prefill(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                              LogitRows rows, unit::PrefillCapture* capture) {
  PrefillObserver* observer = unit::own_capture<CpuPrefillCapture>(capture, "CpuModel::prefill");
  return prefill(unit::own_cache<SequenceState>(&cache, 0, "CpuModel"), tokens, rows, observer);
}

std::vector<LogitMatrix> CpuModel::prefill_batch(
    std::span<unit::SequenceCache* const> caches,
    std::span<const std::span<const std::int32_t>> tokens, LogitRows rows) {
  const std::vector<SequenceState*> states = unit::own_caches<SequenceState>(caches, "CpuModel");
  return prefill_batch(std::span<SequenceState* const>(states), tokens, rows);
}

LogitMatrix CpuModel::decode_step(std::span<unit::SequenceCache* const> caches,
                                  std::span<const std::int32_t> tokens) {
  const std::vector<SequenceState*> states = unit::own_caches<SequenceState>(caches, "CpuModel");
  return decode_step(std::span<SequenceState* const>(states), tokens);
}

namespace {

// Hands a prefill's layer views to a method's extra-pass observer (methods/extra_pass.h).
class PassObserverAdapter final : public PrefillObserver {
 public:
  explicit PassObserverAdapter(methods::PassObserver& observer) : observer_(observer) {}
  void on_layer(const PrefillLayerView& view) override {
    methods::PassLayerView rows;
    rows.layer = view.layer;
    rows.num_tokens = view.num_tokens;
    rows.queries = view.queries;
    rows.keys = view.keys;
    rows.values = view.values;
    rows.attention_input = view.attention_input;
    observer_.on_layer(rows);
  }

 private:
  methods::PassObserver& observer_;
};

}  // namespace

void CpuModel::observed_pass(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                             methods::PassObserver& observer) {
  SequenceState& state = unit::own_cache<SequenceState>(&cache, 0, "CpuModel");
  if (!observer.wants_attention_output_gradients()) {
    (void)observed_prefill(cache, tokens, LogitRows::none, observer);
    return;
  }
  // KVgrad: the forward with its activations recorded, the backward, then each layer's view with
  // its gradient norms.
  GradientPassRecorder record;
  (void)prefill(state, tokens, LogitRows::none, &record);
  const std::vector<std::vector<float>> norms =
      attention_output_gradient_norms(weights_, record, state.kv_cache());
  for (std::size_t layer = 0; layer < record.layers().size(); ++layer) {
    const GradientPassLayer& act = record.layers()[layer];
    methods::PassLayerView rows;
    rows.layer = static_cast<int>(layer);
    rows.num_tokens = record.num_tokens();
    rows.queries = act.queries;
    rows.keys = act.keys;
    rows.values = act.values;
    rows.attention_input = act.attention_input;
    rows.attention_output_gradient_norms = norms[layer];
    observer.on_layer(rows);
  }
}

LogitMatrix CpuModel::observed_prefill(unit::SequenceCache& cache,
                                       std::span<const std::int32_t> tokens, LogitRows rows,
                                       methods::PassObserver& observer) {
  if (observer.wants_attention_output_gradients())
    throw std::invalid_argument(
        "CpuModel::observed_prefill: gradients are observed_pass's (KVgrad), not a feed's");
  SequenceState& state = unit::own_cache<SequenceState>(&cache, 0, "CpuModel");
  PassObserverAdapter adapter(observer);
  return prefill(state, tokens, rows, &adapter);
}

namespace {

// Hands a decode step's layer views (one row per sequence) to a decode-time compression observer
// (unit::DecodeObserver, runners/unit/decoding_compression.h).
class DecodeObserverAdapter final : public PrefillObserver {
 public:
  explicit DecodeObserverAdapter(unit::DecodeObserver& observer) : observer_(observer) {}
  bool wants_pre_rope_queries() const override { return true; }
  void on_layer(const PrefillLayerView& view) override {
    unit::DecodeLayerView rows;
    rows.layer = view.layer;
    rows.num_sequences = view.num_tokens;  // one token per sequence in a decode step
    rows.positions = view.positions;
    rows.queries_pre_rope = view.queries_pre_rope;
    rows.attention_input = view.attention_input;
    rows.rope_cos = view.rope_cos;
    rows.rope_sin = view.rope_sin;
    observer_.on_layer(rows);
  }

 private:
  unit::DecodeObserver& observer_;
};

}  // namespace

LogitMatrix CpuModel::decode_step_observed(std::span<unit::SequenceCache* const> caches,
                                           std::span<const std::int32_t> tokens,
                                           unit::DecodeObserver& observer) {
  const std::vector<SequenceState*> states = unit::own_caches<SequenceState>(caches, "CpuModel");
  DecodeObserverAdapter adapter(observer);
  return observed_decode(std::span<SequenceState* const>(states), tokens, &adapter);
}

void CpuModel::append_restore_rows(unit::SequenceCache& cache,
                                   const methods::RestoreArtefacts& artefacts) {
  const model::ModelConfig& c = config();
  methods::check_restorekv_fits(artefacts, {.num_layers = c.num_layers,
                                            .hidden_size = c.hidden_size,
                                            .q_width = c.num_heads * c.head_dim,
                                            .kv_width = c.num_kv_heads * c.head_dim,
                                            .intermediate_size = c.intermediate_size});
  SequenceState& state = unit::own_cache<SequenceState>(&cache, 0, "CpuModel");
  std::vector<float> embeddings = artefacts.embeddings;
  for (float& e : embeddings) e = round_as(rounding_, e);
  const methods::LoraAdapter adapter = adapter_in_model_dtype(artefacts.adapter, rounding_);
  const std::vector<std::int32_t> rows(static_cast<std::size_t>(artefacts.tokens), 0);
  SequenceState* const states[] = {&state};
  const std::span<const std::int32_t> token_lists[] = {rows};
  const AdaptedRows adapted{.embeddings = embeddings, .adapter = &adapter};
  (void)forward(states, token_lists, LogitRows::none, nullptr, &adapted);
}

int CpuModel::max_concurrent_cells(const unit::UnitDemand& demand) {
  return std::max(demand.cells, 1);
}

std::vector<LogitMatrix> CpuModel::forward(std::span<SequenceState* const> states,
                                           std::span<const std::span<const std::int32_t>> tokens,
                                           LogitRows rows, PrefillObserver* observer,
                                           const AdaptedRows* adapted) const {
  const model::ModelConfig& c = config();
  const std::size_t n_seq = states.size();
  if (adapted != nullptr && (n_seq != 1 || adapted->adapter == nullptr ||
                             adapted->embeddings.size() !=
                                 tokens.front().size() * static_cast<std::size_t>(c.hidden_size)))
    throw std::invalid_argument(
        "forward: adapted rows need one sequence and [rows, hidden] "
        "embeddings");
  if (tokens.size() != n_seq) {
    throw std::invalid_argument("forward: " + std::to_string(n_seq) + " sequences but " +
                                std::to_string(tokens.size()) + " token lists");
  }
  if (n_seq == 0) return {};
  std::set<const SequenceState*> distinct;
  for (std::size_t i = 0; i < n_seq; ++i) {
    const SequenceState* s = states[i];
    if (s == nullptr)
      throw std::invalid_argument("forward: sequence " + std::to_string(i) + " is null");
    if (!distinct.insert(s).second) {
      throw std::invalid_argument("forward: sequence " + std::to_string(i) +
                                  " appears twice in one batch");
    }
    const KvCache& cache = s->kv_cache();
    if (cache.num_layers() != c.num_layers || cache.num_kv_heads() != c.num_kv_heads ||
        cache.head_dim() != c.head_dim) {
      throw std::invalid_argument("forward: sequence " + std::to_string(i) +
                                  " was made for a model of another shape");
    }
    if (tokens[i].empty()) {
      throw std::invalid_argument("forward: sequence " + std::to_string(i) + " has no tokens");
    }
    for (std::size_t t = 0; t < tokens[i].size(); ++t) {
      if (tokens[i][t] < 0 || tokens[i][t] >= c.vocab_size) {
        // Bad input, not a bug: ids come from a tokenizer or a caller (exit 1, not 2).
        throw model::ModelInputError("forward: sequence " + std::to_string(i) + ": token id " +
                                     std::to_string(tokens[i][t]) + " at index " +
                                     std::to_string(t) + " is outside the vocabulary [0, " +
                                     std::to_string(c.vocab_size) + ")");
      }
    }
  }

  const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
  const std::size_t dim = static_cast<std::size_t>(c.head_dim);
  const std::size_t q_width = static_cast<std::size_t>(c.num_heads) * dim;
  const std::size_t kv_width = static_cast<std::size_t>(c.num_kv_heads) * dim;
  const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(std::pow(static_cast<double>(c.head_dim), -0.5));

  // Row layout: sequence i owns rows [first_row[i], first_row[i] + tokens[i].size()).
  std::vector<std::size_t> first_row(n_seq + 1, 0);
  for (std::size_t i = 0; i < n_seq; ++i) first_row[i + 1] = first_row[i] + tokens[i].size();
  const std::size_t total_rows = first_row[n_seq];
  const int r = static_cast<int>(total_rows);
  std::vector<std::int32_t> all_tokens(total_rows);  // [R]
  std::vector<std::int32_t> positions(total_rows);   // [R] original positions
  for (std::size_t i = 0; i < n_seq; ++i) {
    const std::int64_t start = states[i]->original_length();
    if (start + static_cast<std::int64_t>(tokens[i].size()) >
        std::numeric_limits<std::int32_t>::max()) {
      throw std::length_error("forward: sequence " + std::to_string(i) +
                              " would exceed 2^31 - 1 positions");
    }
    for (std::size_t t = 0; t < tokens[i].size(); ++t) {
      all_tokens[first_row[i] + t] = tokens[i][t];
      positions[first_row[i] + t] = static_cast<std::int32_t>(start + static_cast<std::int64_t>(t));
    }
  }

  std::vector<float> x(total_rows * hidden);       // [R, hidden] residual stream
  std::vector<float> normed(total_rows * hidden);  // [R, hidden]
  std::vector<float> q(total_rows * q_width);      // [R, num_heads, head_dim]
  std::vector<float> k(total_rows * kv_width);     // [R, num_kv_heads, head_dim]
  std::vector<float> v(total_rows * kv_width);     // [R, num_kv_heads, head_dim]
  std::vector<float> attn(total_rows * q_width);   // [R, num_heads, head_dim]
  std::vector<float> proj(total_rows * hidden);    // [R, hidden]
  std::vector<float> gate(total_rows * inter);     // [R, intermediate]
  std::vector<float> up(total_rows * inter);       // [R, intermediate]
  std::vector<float> cos(total_rows * dim);        // [R, head_dim]
  std::vector<float> sin(total_rows * dim);        // [R, head_dim]
  const bool keep_pre_rope = observer != nullptr && observer->wants_pre_rope_queries();
  std::vector<float> q_pre_rope(keep_pre_rope ? total_rows * q_width : 0);   // [R, heads, head_dim]
  std::vector<float> k_pre_rope(keep_pre_rope ? total_rows * kv_width : 0);  // [R, kv, head_dim]

  const bool keep_residual = observer != nullptr && observer->wants_attention_residual();
  std::vector<float> residual_before(keep_residual ? total_rows * hidden : 0);  // [R, hidden]

  if (adapted != nullptr) {
    std::copy(adapted->embeddings.begin(), adapted->embeddings.end(), x.begin());
  } else {
    embed_tokens(weights_.embed_tokens, c.vocab_size, c.hidden_size, all_tokens, x);
  }
  // LoRA term of `target` in this layer, if the adapted rows' adapter has one (y += s·B(A x)).
  const auto lora = [&](int layer, methods::LoraTarget target, std::span<const float> input,
                        std::span<float> output) {
    if (adapted == nullptr) return;
    const auto& modules = adapted->adapter->layers[static_cast<std::size_t>(layer)];
    const auto found = modules.find(target);
    if (found == modules.end()) return;
    add_lora(input, r, found->second, adapted->adapter->rank, adapted->adapter->scaling, rounding_,
             output);
  };
  model::rope_cos_sin(inv_freq_, positions, rounding_, cos, sin);
  // A projection of the R rows on its packed copy: linear_bf16 for a bf16 model, else linear().
  const auto project = [&](std::span<const float> input, int in, const PackedBf16Weight* packed,
                           const PackedF32Weight* packed_f32, std::span<const float> bias,
                           std::span<float> output) {
    if (packed != nullptr) {
      linear_bf16(input, r, in, *packed, bias, rounding_, output);
    } else {
      linear(input, r, in, *packed_f32, bias, rounding_, output);
    }
  };

  try {
    for (int layer = 0; layer < c.num_layers; ++layer) {
      const model::LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
      const PackedLayer<PackedBf16Weight>* packed =
          packed_layers_.empty() ? nullptr : &packed_layers_[static_cast<std::size_t>(layer)];
      const PackedLayer<PackedF32Weight>* packed_f32 =
          packed_f32_layers_.empty() ? nullptr
                                     : &packed_f32_layers_[static_cast<std::size_t>(layer)];
      rms_norm(x, w.input_norm, c.hidden_size, eps, rounding_, normed);
      project(normed, c.hidden_size, packed ? &packed->q : nullptr,
              packed_f32 ? &packed_f32->q : nullptr, w.q_bias, q);
      project(normed, c.hidden_size, packed ? &packed->k : nullptr,
              packed_f32 ? &packed_f32->k : nullptr, w.k_bias, k);
      project(normed, c.hidden_size, packed ? &packed->v : nullptr,
              packed_f32 ? &packed_f32->v : nullptr, w.v_bias, v);
      lora(layer, methods::LoraTarget::q_proj, normed, q);
      lora(layer, methods::LoraTarget::k_proj, normed, k);
      lora(layer, methods::LoraTarget::v_proj, normed, v);
      if (keep_pre_rope) {
        std::copy(q.begin(), q.end(), q_pre_rope.begin());
        std::copy(k.begin(), k.end(), k_pre_rope.begin());
      }
      apply_rope(q, c.num_heads, c.head_dim, cos, sin, rounding_);
      apply_rope(k, c.num_kv_heads, c.head_dim, cos, sin, rounding_);

      for (std::size_t i = 0; i < n_seq; ++i) {
        const std::size_t n = tokens[i].size();
        states[i]->kv_cache().append_layer(
            layer, std::span<const std::int32_t>(positions).subspan(first_row[i], n),
            rows_of(k, first_row[i], n, kv_width), rows_of(v, first_row[i], n, kv_width));
      }
      if (observer != nullptr) {
        PrefillLayerView view;
        view.layer = layer;
        view.num_tokens = r;
        view.num_heads = c.num_heads;
        view.num_kv_heads = c.num_kv_heads;
        view.head_dim = c.head_dim;
        view.positions = positions;
        view.queries_pre_rope = q_pre_rope;
        view.keys_pre_rope = k_pre_rope;
        view.queries = q;
        view.keys = k;
        view.values = v;
        view.attention_input = normed;
        view.rope_cos = cos;
        view.rope_sin = sin;
        observer->on_layer(view);
      }

      // Attention: one problem per sequence, all (sequence, head, rows) tasks in one parallel loop.
      std::vector<std::vector<KvHeadView>> kv_views(n_seq);
      std::vector<AttentionProblem> problems(n_seq);
      std::vector<std::pair<std::size_t, AttentionTask>> tasks;
      const std::size_t rows_per_task = backend_ == AttentionBackend::eager
                                            ? static_cast<std::size_t>(options_.eager_query_chunk)
                                            : kSdpaRowsPerTask;
      for (std::size_t i = 0; i < n_seq; ++i) {
        const std::size_t n = tokens[i].size();
        const KvCache& cache = states[i]->kv_cache();
        for (int h = 0; h < c.num_kv_heads; ++h) kv_views[i].push_back(cache.head(layer, h));
        AttentionProblem& p = problems[i];
        p.num_heads = c.num_heads;
        p.num_kv_heads = c.num_kv_heads;
        p.head_dim = c.head_dim;
        p.scale = scale;
        p.rounding = rounding_;
        p.queries = rows_of(q, first_row[i], n, q_width);
        p.query_positions = std::span<const std::int32_t>(positions).subspan(first_row[i], n);
        p.kv_heads = kv_views[i];
        validate_attention_problem(p, rows_of(attn, first_row[i], n, q_width));
        for (const AttentionTask& task : split_attention_tasks(p, rows_per_task)) {
          tasks.emplace_back(i, task);
        }
      }
      const std::ptrdiff_t task_count = static_cast<std::ptrdiff_t>(tasks.size());
      std::size_t key_block = static_cast<std::size_t>(options_.sdpa_key_block);
      if (options_.sdpa_decode_one_block && observer == nullptr &&
          std::all_of(tokens.begin(), tokens.end(), [](const auto& t) { return t.size() == 1; })) {
        // A decode step softmaxed as one block over every held key (the CUDA decode kernel's
        // order: one max, then every p against it).
        for (const auto& heads : kv_views) {
          for (const KvHeadView& head : heads) key_block = std::max(key_block, head.size());
        }
      }
#pragma omp parallel if (task_count > 1)
      {
        // Per-thread working memory kept across calls (no page faults on every layer).
        static thread_local std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
        for (std::ptrdiff_t t = 0; t < task_count; ++t) {
          const auto& [i, task] = tasks[static_cast<std::size_t>(t)];
          const std::span<float> out = rows_of(attn, first_row[i], tokens[i].size(), q_width);
          if (backend_ == AttentionBackend::eager) {
            eager_attention_task(problems[i], task, out, scratch);
          } else if (options_.sdpa_numerics == SdpaNumerics::torch_cpu_flash) {
            sdpa_torch_cpu_attention_task(problems[i], task, out);
          } else {
            sdpa_attention_task(problems[i], task, key_block, out, scratch);
          }
        }
      }

      project(attn, static_cast<int>(q_width), packed ? &packed->o : nullptr,
              packed_f32 ? &packed_f32->o : nullptr, {}, proj);
      lora(layer, methods::LoraTarget::o_proj, attn, proj);
      if (keep_residual) std::copy(x.begin(), x.end(), residual_before.begin());
      residual_add(x, proj, rounding_);
      if (keep_residual) observer->on_attention_residual(layer, residual_before, x);
      rms_norm(x, w.post_attention_norm, c.hidden_size, eps, rounding_, normed);
      project(normed, c.hidden_size, packed ? &packed->gate : nullptr,
              packed_f32 ? &packed_f32->gate : nullptr, {}, gate);
      project(normed, c.hidden_size, packed ? &packed->up : nullptr,
              packed_f32 ? &packed_f32->up : nullptr, {}, up);
      lora(layer, methods::LoraTarget::gate_proj, normed, gate);
      lora(layer, methods::LoraTarget::up_proj, normed, up);
      silu_mul(gate, up, rounding_, gate);
      project(gate, c.intermediate_size, packed ? &packed->down : nullptr,
              packed_f32 ? &packed_f32->down : nullptr, {}, proj);
      lora(layer, methods::LoraTarget::down_proj, gate, proj);
      residual_add(x, proj, rounding_);
    }
  } catch (...) {
    for (std::size_t i = 0; i < n_seq; ++i) states[i]->kv_cache().discard_uncommitted();
    throw;
  }
  for (std::size_t i = 0; i < n_seq; ++i) {
    states[i]->kv_cache().commit_step(static_cast<std::int64_t>(tokens[i].size()));
  }

  // Logits: gather the rows that need them, final norm, lm_head.
  std::vector<std::size_t> logit_rows;  // indices into the R rows
  std::vector<std::size_t> logit_count(n_seq, 0);
  for (std::size_t i = 0; i < n_seq; ++i) {
    const std::size_t n = tokens[i].size();
    if (rows == LogitRows::all) {
      for (std::size_t t = 0; t < n; ++t) logit_rows.push_back(first_row[i] + t);
      logit_count[i] = n;
    } else if (rows == LogitRows::last) {
      logit_rows.push_back(first_row[i] + n - 1);
      logit_count[i] = 1;
    }
  }
  const std::size_t vocab = static_cast<std::size_t>(c.vocab_size);
  std::vector<float> selected(logit_rows.size() * hidden);  // [rows with logits, hidden]
  for (std::size_t j = 0; j < logit_rows.size(); ++j) {
    std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(logit_rows[j] * hidden), hidden,
                selected.begin() + static_cast<std::ptrdiff_t>(j * hidden));
  }
  rms_norm(selected, weights_.final_norm, c.hidden_size, eps, rounding_, selected);
  std::vector<float> logits(logit_rows.size() * vocab);  // [rows with logits, vocab]
  if (uses_bf16_kernel()) {
    linear_bf16(selected, static_cast<int>(logit_rows.size()), c.hidden_size, packed_output_, {},
                rounding_, logits);
  } else {
    linear(selected, static_cast<int>(logit_rows.size()), c.hidden_size, packed_f32_output_, {},
           rounding_, logits);
  }

  std::vector<LogitMatrix> result(n_seq);
  std::size_t next = 0;
  for (std::size_t i = 0; i < n_seq; ++i) {
    result[i].rows = static_cast<int>(logit_count[i]);
    result[i].vocab = c.vocab_size;
    result[i].values.assign(
        logits.begin() + static_cast<std::ptrdiff_t>(next * vocab),
        logits.begin() + static_cast<std::ptrdiff_t>((next + logit_count[i]) * vocab));
    next += logit_count[i];
  }
  return result;
}

}  // namespace kvaudit::cpu
