// InferenceEngine: the primitives the fan-out (unit_runner.h) needs from a device, so that one
// run_unit drives both the CPU reference backend (cpu::CpuModel, runners/cpu) and the CUDA backend
// (cuda::CudaModel, runners/cuda). Nothing here chooses by device: an engine is handed in.
//
//   prefill        tokens on top of a sequence's cache (positions continue at its original
//                  length), optionally observed by a PrefillCapture this engine made
//   prefill_batch  several sequences at once, each with its own tokens
//   decode_step    one token per sequence → logits [batch, vocab]
//   SequenceCache  one sequence's ragged per-(layer, KV head) cache: fork (deep copy), truncate
//                  (rewind to a length), retain (evict to per-head kept sets)
//   new_capture    what eviction methods read from the one prefill (prefill_capture.h)
//   max_concurrent_cells  how many cells' caches fit at once (memory), before anything runs
//
// Both implementations follow the same position and eviction rules (docs/design/protocols.md):
// every token ever fed gets the next original position, eviction keeps that bookkeeping, and a
// truncated cache continues at the truncation length. Their numerics are twins: bf16 rounding
// points of HF transformers on both devices (docs/design/numerics.md); tests/cuda compares them.
//
// Threads: calls on one engine must not overlap. When concurrent_cache_ops() is true, fork,
// truncate, retain and the capture's host views may be used on distinct sequences from several
// threads at once (the CPU backend); otherwise the fan-out does them one after another (the GPU:
// one stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/attention_backend.h"
#include "base/device.h"
#include "base/logit_matrix.h"
#include "methods/extra_pass.h"
#include "methods/method.h"
#include "methods/restorekv_artefacts.h"
#include "runners/model/model_config.h"
#include "runners/model/model_weights.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::unit {

// One (layer, KV head) of a sequence's cache on the host, in cache order (original positions
// strictly ascending): what decode-time compression scores (runners/unit/decoding_compression.h).
// The spans are valid until the cache changes.
struct CacheHeadEntries {
  std::span<const std::int32_t> positions;  // [n] original positions
  std::span<const float> keys;              // [n, head_dim] post-RoPE, as stored
  std::span<const float> values;            // [n, head_dim]
};

// One layer of an observed decode step (InferenceEngine::decode_step_observed), one row per
// sequence of the batch, as the engine computed it (bf16-representable in bf16 mode). Valid only
// during the call.
struct DecodeLayerView {
  int layer = 0;
  int num_sequences = 0;                    // B: the step's batch
  std::span<const std::int32_t> positions;  // [B] original position of each row's token
  std::span<const float> queries_pre_rope;  // [B, H, d] q_proj output (kvpress
                                            // get_prerope_query_states of the row)
  std::span<const float> attention_input;   // [B, D] input_layernorm output
  std::span<const float> rope_cos;          // [B, d] the row's RoPE cos/sin as the model rounds
  std::span<const float> rope_sin;          //        them (kvpress's position_embeddings)
};

// What an engine calls back during decode_step_observed: once per layer, in layer order, after
// the step's keys and values of that layer are in the caches.
class DecodeObserver {
 public:
  virtual ~DecodeObserver() = default;
  virtual void on_layer(const DecodeLayerView& view) = 0;
};

// One sequence's KV cache, held by the engine that made it (and usable only with that engine).
class SequenceCache {
 public:
  virtual ~SequenceCache() = default;

  virtual int num_layers() const = 0;
  virtual int num_kv_heads() const = 0;
  // Tokens ever fed (kept or evicted) = the RoPE position of the next token.
  virtual std::int64_t original_length() const = 0;
  // Entries kept over all layers and KV heads, and the bytes their keys and values take at the
  // engine's storage precision (entries · 2 · head_dim · bytes per element).
  virtual std::size_t kept_entries() const = 0;
  virtual std::size_t kept_bytes() const = 0;

  // The kept entries of (layer, kv_head) (CacheHeadEntries above). An engine whose cache is not
  // on the host throws std::invalid_argument (the default: only the CPU engine exposes them).
  virtual CacheHeadEntries head_entries(int layer, int kv_head) const {
    (void)layer;
    (void)kv_head;
    throw std::invalid_argument(
        "this engine's KV cache cannot expose its entries to decode-time compression (run with "
        "--device cpu)");
  }

  // A deep copy that evolves on its own (the fan-out's per-cell cache).
  virtual std::unique_ptr<SequenceCache> fork() const = 0;
  // Drops every entry at an original position ≥ length; original_length() becomes length.
  // Throws std::invalid_argument for a length outside [0, original_length()].
  virtual void truncate(std::int64_t length) = 0;
  // Evicts: (layer, KV head) keeps exactly kept[layer][head] (original positions, strictly
  // ascending, a subset of what the head holds). The selection must have num_layers() ×
  // num_kv_heads() lists. Throws std::invalid_argument otherwise.
  virtual void retain(const methods::Selection& selection) = 0;
  // key_rerotation (kvpress KeyRerotationPress; methods/key_rerotation.h): after retain(), rotates
  // every kept key from its original RoPE position p to its index i in its head's kept list
  // (k' = k ⊙ cos((i−p)θ) + rotate_half(k) ⊙ sin((i−p)θ), θ = inv_freq; products and sum rounded
  // to bf16 when model_is_bf16). Positions, values and original_length() do not change, so later
  // tokens keep their original positions, as in kvpress. An engine that cannot throws
  // std::invalid_argument (the default: only the CPU engine re-rotates).
  virtual void rerotate_kept_keys(std::span<const float> inv_freq, bool model_is_bf16) {
    (void)inv_freq;
    (void)model_is_bf16;
    throw std::invalid_argument(
        "this engine's KV cache cannot re-rotate kept keys (key_rerotation runs on the CPU "
        "engine only)");
  }
  // ThinK (methods/think.h): after retain(), sets to zero the key channels
  // selection.zeroed_key_channels[layer][head] of every kept entry of that head, and from then on
  // kept_bytes() counts those channels as freed (a cache that stored only the live channels would
  // save them). Throws std::invalid_argument for a list of the wrong shape or a channel outside
  // [0, head_dim) or not strictly ascending. An engine that cannot throws (the default: only the
  // CPU engine prunes key channels).
  virtual void zero_key_channels(const methods::Selection& selection) {
    (void)selection;
    throw std::invalid_argument(
        "this engine's KV cache cannot prune key channels (think runs on the CPU engine only)");
  }
  // Merging (methods/merging.h): after retain(), overwrites the value vector of each
  // selection.value_replacements entry (rounded to bf16 when model_is_bf16). Throws
  // std::invalid_argument for a layer, head or position the cache does not keep or a value of the
  // wrong length. An engine that cannot throws (the default: only the CPU engine merges values).
  virtual void replace_values(const methods::Selection& selection, bool model_is_bf16) {
    (void)selection;
    (void)model_is_bf16;
    throw std::invalid_argument(
        "this engine's KV cache cannot rewrite kept values (merging runs on the CPU engine only)");
  }
};

// An engine's own cache type behind a SequenceCache pointer (the engines' implementations of the
// interface call these): throws std::invalid_argument naming `engine` and the index for a null
// pointer or another engine's cache.
template <typename Cache>
Cache& own_cache(SequenceCache* cache, std::size_t index, const char* engine) {
  auto* own = dynamic_cast<Cache*>(cache);
  if (own == nullptr) {
    throw std::invalid_argument(std::string(engine) + ": sequence " + std::to_string(index) +
                                (cache == nullptr ? " is null" : " is another engine's cache"));
  }
  return *own;
}
template <typename Cache>
std::vector<Cache*> own_caches(std::span<SequenceCache* const> caches, const char* engine) {
  std::vector<Cache*> out;
  out.reserve(caches.size());
  for (std::size_t i = 0; i < caches.size(); ++i) {
    out.push_back(&own_cache<Cache>(caches[i], i, engine));
  }
  return out;
}
// The engine's own capture type (Capture derives from PrefillCapture and the engine's observer),
// or nullptr for none; throws std::invalid_argument for another engine's capture.
template <typename Capture>
Capture* own_capture(PrefillCapture* capture, const char* engine) {
  if (capture == nullptr) return nullptr;
  auto* own = dynamic_cast<Capture*>(capture);
  if (own == nullptr) {
    throw std::invalid_argument(std::string(engine) + ": the capture was made by another engine");
  }
  return own;
}

// Throws std::invalid_argument unless `selection` has `num_layers` lists of `num_kv_heads` kept
// sets each (shared by both SequenceCache implementations' retain).
void check_selection_shape(const methods::Selection& selection, int num_layers, int num_kv_heads);

// What the fan-out asks of the engine's memory for one unit.
struct UnitDemand {
  int prefill_tokens = 0;  // T of the unit's one prefill (context + question)
  int capacity = 0;        // entries per (layer, KV head) a cell's cache may reach
  int cells = 0;           // cells of the unit (each holds its own cache while decoding)
  // What the unit's prefill capture keeps (boundaries empty: no capture); a GPU engine plans its
  // device copies (the K/V copies alone are 2·layers·Hkv·max(b)·d f32).
  CaptureOptions capture;
};

// The unit cannot run on this engine at all (e.g. its prefill does not fit the GPU's memory).
// The message begins with the device's resource, e.g. "GPU memory: ...".
class EngineCapacityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InferenceEngine {
 public:
  virtual ~InferenceEngine() = default;

  virtual const model::ModelConfig& config() const = 0;
  // RoPE inverse frequencies [head_dim / 2] (methods that rotate query statistics read them).
  virtual std::span<const float> rope_inv_freq() const = 0;
  virtual AttentionBackend attention_backend() const = 0;
  virtual Device device() const = 0;
  // Whether `weights` is the host ModelWeights object this engine was built from (methods read
  // o_proj from it, so the fan-out refuses any other).
  virtual bool built_from(const model::ModelWeights& weights) const = 0;

  // An empty sequence that will hold at most `capacity` entries per (layer, KV head) (the CPU
  // backend grows without bound and ignores it).
  virtual std::unique_ptr<SequenceCache> new_cache(std::int64_t capacity) = 0;
  // A capture for one prefill of this engine (prefill_capture.h). Throws std::invalid_argument
  // for invalid options.
  virtual std::unique_ptr<PrefillCapture> new_capture(CaptureOptions options) = 0;

  // Runs `tokens` on top of what `cache` holds and returns logits for `rows` (none: 0 rows, last:
  // 1, all: tokens.size()). `capture` (optional, made by this engine's new_capture) observes every
  // layer. Throws std::invalid_argument for an empty token list, an id outside the vocabulary or a
  // cache of another engine or shape; the cache is then unchanged.
  virtual LogitMatrix prefill(SequenceCache& cache, std::span<const std::int32_t> tokens,
                              LogitRows rows, PrefillCapture* capture = nullptr) = 0;
  // Several distinct caches at once, each with its own tokens; result i is what prefill() would
  // return for cache i.
  virtual std::vector<LogitMatrix> prefill_batch(
      std::span<SequenceCache* const> caches, std::span<const std::span<const std::int32_t>> tokens,
      LogitRows rows) = 0;
  // One token per cache; logits [caches.size(), vocab], row i for cache i.
  virtual LogitMatrix decode_step(std::span<SequenceCache* const> caches,
                                  std::span<const std::int32_t> tokens) = 0;
  // A method's extra pass (methods/extra_pass.h): runs `tokens` on top of `cache` as prefill
  // does (appending them; no logits) and calls `observer` once per layer, in order, with the
  // rows' post-RoPE queries, keys, values and attention input, after the layer's keys and values
  // are in the cache and before its attention (an observer that wants_attention_output_gradients
  // — KVgrad — is called after the forward and a backward pass instead, with the gradient norms;
  // the CPU engine only). The default refuses: it throws
  // std::invalid_argument naming the device (the CUDA engine has no such pass yet).
  virtual void observed_pass(SequenceCache& cache, std::span<const std::int32_t> tokens,
                             methods::PassObserver& observer);
  // prefill() (no capture) that also calls `observer` once per layer with the rows' queries, keys,
  // values and attention input, as observed_pass does (never with gradients), and returns the
  // logits of `rows`: how DMS with decoding scores the rest of the prompt, fed after its prefill
  // eviction (runners/unit/dms_decoding.h). The default refuses with std::invalid_argument naming
  // the device (the CPU engine has it).
  virtual LogitMatrix observed_prefill(SequenceCache& cache, std::span<const std::int32_t> tokens,
                                       LogitRows rows, methods::PassObserver& observer);
  // RestoreKV (methods/restorekv.h): runs the artefacts' restore embeddings (in place of token
  // embeddings) through the model with their LoRA adapter active, on top of `cache`, appending
  // their keys and values at the next n positions; no logits. Throws std::invalid_argument when
  // the artefacts do not fit the model; the default refuses naming the device (the CPU engine
  // has it).
  virtual void append_restore_rows(SequenceCache& cache,
                                   const methods::RestoreArtefacts& artefacts);

  // decode_step that also calls `observer` once per layer with the step's rows
  // (DecodeLayerView): what decode-time compression buffers (kvpress DecodingPress's hidden
  // states). The default refuses with std::invalid_argument: only the CPU engine observes decode
  // steps so far (run with --device cpu).
  virtual LogitMatrix decode_step_observed(std::span<SequenceCache* const> caches,
                                           std::span<const std::int32_t> tokens,
                                           DecodeObserver& observer) {
    (void)caches;
    (void)tokens;
    (void)observer;
    throw std::invalid_argument(
        "decode-time compression needs observed decode steps, which only the CPU engine provides "
        "so far: run with --device cpu");
  }

  // The most cells whose caches may live at once beside the prefilled one (≥ 1). Throws
  // EngineCapacityError when the unit cannot run at all.
  virtual int max_concurrent_cells(const UnitDemand& demand) = 0;
  // See "Threads" above.
  virtual bool concurrent_cache_ops() const = 0;
};

}  // namespace kvaudit::unit
