// ExtraPass: a forward pass of its own that a method needs after the prefill (KVzip's context
// reconstruction, methods/kvzip.h), run by the unit runner (runners/unit/unit_runner.h).
//
// A method that needs one returns it from Method::extra_pass(). For a cell at boundary b the runner
//   1. asks chunks(cached_tokens = prompt[0..b), prompt) for the token lists to run;
//   2. runs each chunk on its own copy of the prefilled cache truncated to b (positions continue
//      at b; the cell's cache is never altered), through InferenceEngine::observed_pass, which
//      calls back once per layer, in layer order, after the chunk's keys and values of that
//      layer are in the copy and before its attention (PassLayerView: the chunk's rows);
//   3. hands every row view to observe() with the LayerCapture of that layer at b (the cached keys
//      and values 0..b-1, o_proj), which folds it into an ExtraPassResult (per layer, KV head and
//      cached position: one score);
//   4. passes the result to select() through SelectionContext::extra_pass.
// Cells whose passes have the same key() at the same boundary of a unit share one run (the
// budget, and parameters that only change the selection, do not enter the key); each such cell's
// recorded selection time includes the pass's time.
//
// The reconstruction prompt's pieces are token ids the runner takes from the unit's tokenizer
// (kvpress builds them from the chat template; PassPrompt) — for models without a tokenizer (the
// tiny test models) the caller supplies the ids kvpress used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "methods/layer_capture.h"

namespace kvaudit::methods {

// The pieces kvpress's KVzipPress.__call__/prepare build with the tokenizer (docs in kvzip.h).
struct PassPrompt {
  // Tokens of the chat template's head before the user content (kvpress prefix_length): cached
  // positions below it are not reconstructed.
  int prefix_length = 0;
  // The template's tail after the user content, with the generation prompt (kvpress _suffix_ids;
  // "\n" for a model without a chat template).
  std::vector<std::int32_t> suffix;
  // "\n\nRepeat the previous context exactly." (first chunk) and "\n\nRepeat the part of the
  // previous context exactly, starting with" (later chunks), encoded without special tokens.
  std::vector<std::int32_t> repeat_first;
  std::vector<std::int32_t> repeat_next;

  bool empty() const { return suffix.empty() && repeat_first.empty() && repeat_next.empty(); }
};

// One run of the pass: `tokens` fed on top of the cache truncated to b; it reconstructs the
// cached positions [first, end).
struct PassChunk {
  std::vector<std::int32_t> tokens;
  int first = 0;
  int end = 0;
};

// A layer of one chunk's forward, as the engine computed it (bf16-representable in bf16 mode),
// token-major: row t holds every head of token t. Valid only during the call.
struct PassLayerView {
  int layer = 0;
  int num_tokens = 0;                      // T: the chunk's tokens (at positions b..b+T-1)
  std::span<const float> queries;          // [T, H, d] post-RoPE
  std::span<const float> keys;             // [T, Hkv, d] post-RoPE
  std::span<const float> values;           // [T, Hkv, d]
  std::span<const float> attention_input;  // [T, D] input_layernorm output
  // [T] ‖∂Φ/∂a_t‖₂ of this layer's attention output (KVgrad's objective, runners/cpu/
  // attention_output_gradients.h); empty unless the pass asked for gradients. When present, the
  // engine calls back after the whole forward and its backward, not before the layer's attention.
  std::span<const float> attention_output_gradient_norms;
};

// What an engine calls back during InferenceEngine::observed_pass.
class PassObserver {
 public:
  virtual ~PassObserver() = default;
  virtual void on_layer(const PassLayerView& view) = 0;
  // Whether the views must carry attention_output_gradient_norms (a backward pass after the
  // forward; only the CPU engine has one).
  virtual bool wants_attention_output_gradients() const { return false; }
};

// The pass's outcome for one boundary: scores[(layer · Hkv + kv_head) · length + j].
struct ExtraPassResult {
  int num_layers = 0;
  int num_kv_heads = 0;
  int length = 0;  // b
  std::vector<float> scores;
  double seconds = 0.0;  // wall time of the pass (all chunks)

  float& at(int layer, int head, int position) { return scores[index(layer, head, position)]; }
  float at(int layer, int head, int position) const { return scores[index(layer, head, position)]; }

 private:
  std::size_t index(int layer, int head, int position) const {
    return (static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads) +
            static_cast<std::size_t>(head)) *
               static_cast<std::size_t>(length) +
           static_cast<std::size_t>(position);
  }
};

class ExtraPass {
 public:
  virtual ~ExtraPass() = default;
  // Equal keys (at one boundary of one unit) mean equal results: the runner runs the pass once.
  // Keys start with the method's id, so passes of different methods never share one.
  virtual std::string pass_key() const = 0;
  // Whether observe() needs PassLayerView::attention_output_gradient_norms (KVgrad).
  virtual bool needs_attention_output_gradients() const { return false; }
  // The runs for cached tokens 0..b-1 (none: the result stays as initial_result made it). Throws
  // std::invalid_argument when the prompt lacks what the pass needs.
  virtual std::vector<PassChunk> chunks(std::span<const std::int32_t> cached_tokens,
                                        const PassPrompt& prompt) const = 0;
  // The result before any chunk: shape of `layers` (every layer at b), scores zero.
  ExtraPassResult initial_result(std::span<const LayerCapture> layers) const;
  // Folds one layer of one chunk into `result`. `cached` is that layer's view at b.
  virtual void observe(const LayerCapture& cached, const PassChunk& chunk,
                       const PassLayerView& rows, ExtraPassResult& result) const = 0;
};

}  // namespace kvaudit::methods
