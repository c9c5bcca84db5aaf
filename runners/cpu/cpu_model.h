// CpuModel: the CPU reference backend's forward pass for Llama / Qwen2 / Mistral decoders in HF
// layout (runners/model/model_weights.h), with two attention backends and a ragged KV cache.
//
// Numerics follow HF transformers exactly (docs/design/numerics.md): pre-norm decoder layers,
// rotate-half RoPE, GQA with kv_head = head / (num_heads / num_kv_heads). When the checkpoint
// dtype is bf16 every intermediate is rounded to bf16 at HF's rounding points (so CPU results
// predict GPU results); in f32 mode nothing is rounded. Attention backends:
//   eager  HF eager: S = QKᵀ [bf16], ×scale [bf16], causal mask, fp32 softmax [bf16], P·V [bf16];
//          computed in query-row chunks (results do not depend on the chunk size).
//   sdpa   flash-style online softmax: fp32 S never rounded, running max/sum, P [bf16] before P·V,
//          fp32 accumulation, division at the end, output [bf16]; computed in key blocks.
// Both attend only over the entries each KV head keeps, and causally within a prefill chunk: a
// query at position p sees the kept keys with position ≤ p.
//
// Threads: everything runs on one OpenMP thread pool (OMP_NUM_THREADS): attention over (sequence,
// head, rows) tasks, element-wise kernels over rows, GEMMs as per-thread slices of the output
// features. Results do not depend on the thread count, nor on the instruction-set level
// (KVAUDIT_CPU_ISA, cpu_isa.h): docs/design/numerics.md §Canonical evaluation order. On a machine
// shared with other jobs, OMP_WAIT_POLICY=passive avoids threads spin-waiting for a descheduled
// peer.
//
// GEMMs: the constructor packs q/k/v/o/gate/up/down and the output projection once — a bf16 model's
// to bf16 pairs (PackedBf16Weight, half the f32 weights' size; the forward runs linear_bf16: exact
// bf16 products, fp32 sums in VDPBF16PS's order), an f32 model's to f32 blocks (PackedF32Weight, a
// copy of the same size; the forward runs linear(): one fma chain per output in input order).
// LoRA terms and KVgrad's backward use linear() and gemm() on the unpacked weights.
//
// It is the CPU backend's unit::InferenceEngine (runners/unit/inference_engine.h): the fan-out
// drives it through that interface; the SequenceState-typed calls below are the same operations.
//
// Thread safety: a CpuModel does not change after construction; concurrent calls on distinct
// SequenceStates are safe. The weights must outlive the model (it keeps a reference).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/attention_backend.h"
#include "base/logit_matrix.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/linear_bf16.h"
#include "runners/cpu/numerics.h"
#include "runners/cpu/prefill_observer.h"
#include "runners/cpu/sequence_state.h"
#include "runners/model/model_weights.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::cpu {

enum class SdpaNumerics { flash, torch_cpu_flash };

struct CpuModelOptions {
  // eager: query rows per chunk, the unit of parallel work (one KV head's query heads × this many
  // rows). Scores are materialized for at most four (row, head) pairs at a time, so memory stays
  // bounded at any context length; the result does not depend on the chunk size.
  int eager_query_chunk = 64;
  // sdpa: keys per online-softmax block, rounded up to a multiple of 32 (changes only f32
  // rounding).
  int sdpa_key_block = 256;
  // sdpa: a step in which every sequence adds one row (a decode step, no observer) takes all of a
  // head's keys as one block: one max, every p rounded against it. This is the CUDA decode kernel's
  // order, so its CPU twin sets it (tests/cuda cpu_twin_options); off by default (records are
  // made with sdpa_key_block throughout).
  bool sdpa_decode_one_block = false;
  // sdpa numerics: flash (FlashAttention's GPU numerics; the default and the only one for
  // measurements) or torch_cpu_flash, an emulation of PyTorch's CPU flash kernel (approximate
  // vectorized exp; attention_sdpa_torch_cpu.cpp) for comparing with HF goldens made on a CPU.
  SdpaNumerics sdpa_numerics = SdpaNumerics::flash;
};

class CpuModel final : public unit::InferenceEngine {
 public:
  // Validates every weight's size against weights.config and throws model::ModelInputError naming
  // weights.source and the tensor if one is wrong. Keeps a reference to `weights`.
  CpuModel(const model::ModelWeights& weights, AttentionBackend backend,
           CpuModelOptions options = {});
  // The model refers to the weights, so a temporary would dangle.
  CpuModel(model::ModelWeights&& weights, AttentionBackend backend,
           CpuModelOptions options = {}) = delete;

  const model::ModelConfig& config() const override { return weights_.config; }
  AttentionBackend attention_backend() const override { return backend_; }
  Device device() const override { return Device::cpu; }
  bool built_from(const model::ModelWeights& weights) const override {
    return &weights == &weights_;
  }
  Rounding rounding() const { return rounding_; }
  // Whether the projections run on linear_bf16 (every bf16 model; f32 models run linear()).
  bool uses_bf16_kernel() const { return !packed_layers_.empty(); }
  // RoPE inverse frequencies [head_dim / 2] as HF computes them (default or llama3 scaling).
  std::span<const float> rope_inv_freq() const override { return inv_freq_; }

  // A fresh, empty sequence for this model.
  SequenceState new_sequence() const;

  // Runs `tokens` on top of whatever `state` already holds (positions continue at
  // state.original_length(); e.g. context first, question later) and appends their K/V to its
  // cache. Returns logits for `rows`: none → 0 rows, last → 1 row, all → tokens.size() rows.
  // `observer` (optional) sees each layer's Q/K/V (prefill_observer.h).
  // Throws std::invalid_argument for an empty token list, a token id outside the vocabulary or a
  // state of another model shape; on any exception the state is unchanged.
  LogitMatrix prefill(SequenceState& state, std::span<const std::int32_t> tokens, LogitRows rows,
                      PrefillObserver* observer = nullptr);

  // Several sequences at once, each with its own tokens (lengths may differ): the rows of all
  // sequences go through the linear layers together, attention runs per sequence over its own
  // cache. Result i holds the logits of sequence i as prefill() would return them. Sequences must
  // be distinct objects.
  std::vector<LogitMatrix> prefill_batch(std::span<SequenceState* const> states,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows);

  // One decode step for a batch: sequence i consumes tokens[i]. Returns logits [batch, vocab]; row
  // i belongs to sequence i. Equivalent to prefill(…, {tokens[i]}, LogitRows::last) per sequence.
  LogitMatrix decode_step(std::span<SequenceState* const> batch,
                          std::span<const std::int32_t> tokens);

  // unit::InferenceEngine: the calls above on SequenceStates (a cache of another engine is
  // refused with std::invalid_argument); the capture is a CpuPrefillCapture.
  std::unique_ptr<unit::SequenceCache> new_cache(std::int64_t capacity) override;
  std::unique_ptr<unit::PrefillCapture> new_capture(unit::CaptureOptions options) override;
  LogitMatrix prefill(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                      LogitRows rows, unit::PrefillCapture* capture = nullptr) override;
  std::vector<LogitMatrix> prefill_batch(std::span<unit::SequenceCache* const> caches,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows) override;
  LogitMatrix decode_step(std::span<unit::SequenceCache* const> caches,
                          std::span<const std::int32_t> tokens) override;
  // prefill() with a PrefillObserver that hands each layer's rows to `observer`.
  void observed_pass(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                     methods::PassObserver& observer) override;
  // prefill() with the same adapter, returning the logits of `rows`.
  LogitMatrix observed_prefill(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                               LogitRows rows, methods::PassObserver& observer) override;
  // decode_step that calls `observer` per layer with the step's pre-RoPE queries, attention input
  // and RoPE cos/sin (unit::DecodeLayerView; decode-time compression's buffer).
  LogitMatrix decode_step_observed(std::span<unit::SequenceCache* const> caches,
                                   std::span<const std::int32_t> tokens,
                                   unit::DecodeObserver& observer) override;
  // RestoreKV's restore pass: forward() from the artefacts' embeddings (rounded to bf16 in bf16
  // mode, as kvpress casts them to the model dtype) with their LoRA adapter (runners/cpu/lora.h)
  // added to every targeted projection; no observer, no logits.
  void append_restore_rows(unit::SequenceCache& cache,
                           const methods::RestoreArtefacts& artefacts) override;
  // The CPU backend allocates as it goes: every cell of a unit may run at once.
  int max_concurrent_cells(const unit::UnitDemand& demand) override;
  bool concurrent_cache_ops() const override { return true; }

 private:
  // decode_step with an optional observer of every layer.
  LogitMatrix observed_decode(std::span<SequenceState* const> batch,
                              std::span<const std::int32_t> tokens,
                              PrefillObserver* observer) const;
  // Rows that enter as embeddings, with a LoRA adapter active (append_restore_rows).
  struct AdaptedRows {
    std::span<const float> embeddings;    // [rows, hidden], in the model dtype
    const methods::LoraAdapter* adapter;  // in the model dtype (adapter_in_model_dtype)
  };
  // The shared forward: every sequence's tokens as one stack of rows. With `adapted` (one
  // sequence), its rows' inputs are adapted->embeddings instead of the tokens' (whose ids are then
  // only counted) and the adapter's LoRA terms are added to the projections.
  std::vector<LogitMatrix> forward(std::span<SequenceState* const> states,
                                   std::span<const std::span<const std::int32_t>> tokens,
                                   LogitRows rows, PrefillObserver* observer,
                                   const AdaptedRows* adapted = nullptr) const;

  const model::ModelWeights& weights_;
  AttentionBackend backend_;
  CpuModelOptions options_;
  Rounding rounding_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  // The packed weights: bf16 pairs for a bf16 model (uses_bf16_kernel()), f32 blocks otherwise.
  template <class Packed>
  struct PackedLayer {
    Packed q, k, v, o, gate, up, down;
  };
  std::vector<PackedLayer<PackedBf16Weight>> packed_layers_;     // [num_layers] or empty
  PackedBf16Weight packed_output_;                               // lm_head, or tied embed_tokens
  std::vector<PackedLayer<PackedF32Weight>> packed_f32_layers_;  // [num_layers] or empty
  PackedF32Weight packed_f32_output_;
};

}  // namespace kvaudit::cpu
