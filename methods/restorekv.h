// RestoreKV: KVzip plus learned restore tokens. "RestoreKV" (arXiv 2608.01247); kvpress 0.5.5
// kvpress/presses/restorekv_press.py RestoreKVPress (a KVzipPress; variant restorekv_plus =
// kvzip_plus_normalization=True, kvpress's "RestoreKV_plus"). docs/design/restorekv.md.
//
// With b the cached tokens, n the restore tokens and cr the cell's compression ratio (cr > 0):
//   1. KVzip's reconstruction pass scores the b context entries (methods/kvzip.h; the same pass,
//      shared with kvzip cells of the same parameters: the pass key is KVzip's);
//   2. before any eviction, the n restore embeddings E [n, D] run once through the model with the
//      LoRA adapter active (every targeted projection y = W x + s·B(A x)), at positions
//      b .. b+n−1 on the full cache; their keys and values are appended (the restore rows);
//   3. KVzip evicts among the b context entries with the budget-matched ratio
//        r_eff = min(1, cr + n / b)
//      (global: int(N·r_eff) of the N = layers·Hkv·b entries; layerwise: int(Hkv·b·r_eff) per
//      layer; the n_sink first positions protected); the restore rows are never evicted.
//   Everything fed afterwards (the question and suffix, generated tokens) continues at b + n
//   with the adapter inactive. cr = 0 is kvpress's no-op: nothing scored, no restore rows.
// Here select() returns the context kept sets for r_eff and, in Selection::restore_rows, the
// artefacts; the unit runner appends the rows through InferenceEngine::append_restore_rows
// before it evicts (runners/unit/unit_runner.cpp evict_cell) and keeps them in every head.
// Artefacts (users bring them; kvpress downloads higokri/RestoreKV-<model>[_plus]):
// `restore_embeddings` (safetensors, [n, D]) and `adapter` (a PEFT LoRA directory) —
// methods/restorekv_artefacts.h. Only the CPU engine runs the LoRA forward (others refuse; the
// cell fails with that message). Deviations: kvaudit evicts where kvpress masks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/kvzip.h"
#include "methods/method.h"
#include "methods/method_params.h"
#include "methods/restorekv_artefacts.h"

namespace kvaudit::methods {

class RestoreKvMethod final : public Method, public ExtraPass {
 public:
  // Reads and checks both artefacts now (std::invalid_argument naming the file); throws also for
  // n_sink < 0 or chunk_size < 1.
  explicit RestoreKvMethod(RestoreKvParams params);
  // From artefacts already in memory (tests).
  RestoreKvMethod(RestoreKvParams params, std::shared_ptr<const RestoreArtefacts> artefacts);

  // Method
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  const ExtraPass* extra_pass() const override { return this; }
  std::string name() const override {
    return params_.variant == KvzipVariant::kvzip_plus ? "restorekv_plus" : "restorekv";
  }

  // ExtraPass: KVzip's, with KVzip's key (the scores are KVzip's).
  std::string pass_key() const override { return reconstruction_.pass_key(); }
  std::vector<PassChunk> chunks(std::span<const std::int32_t> cached_tokens,
                                const PassPrompt& prompt) const override {
    return reconstruction_.chunks(cached_tokens, prompt);
  }
  void observe(const LayerCapture& cached, const PassChunk& chunk, const PassLayerView& rows,
               ExtraPassResult& result) const override {
    reconstruction_.observe(cached, chunk, rows, result);
  }

  // r_eff = min(1, cr + n / b) in double, as kvpress computes it.
  static double effective_compression(double compression, int restore_tokens, int length);

  const RestoreArtefacts& artefacts() const { return *artefacts_; }

 private:
  RestoreKvParams params_;
  KvzipMethod reconstruction_;
  std::shared_ptr<const RestoreArtefacts> artefacts_;
};

}  // namespace kvaudit::methods
