// check_selection_shape (inference_engine.h).
#include "runners/unit/inference_engine.h"

#include <stdexcept>
#include <string>

namespace kvaudit::unit {

void InferenceEngine::observed_pass(SequenceCache& cache, std::span<const std::int32_t> tokens,
                                    methods::PassObserver& observer) {
  (void)cache;
  (void)tokens;
  (void)observer;
  throw std::invalid_argument("the " + std::string(device_name(device())) +
                              " engine cannot run a method's extra forward pass (KVzip's context "
                              "reconstruction); run such methods on the cpu device");
}

LogitMatrix InferenceEngine::observed_prefill(SequenceCache& cache,
                                              std::span<const std::int32_t> tokens, LogitRows rows,
                                              methods::PassObserver& observer) {
  (void)cache;
  (void)tokens;
  (void)rows;
  (void)observer;
  throw std::invalid_argument("the " + std::string(device_name(device())) +
                              " engine cannot observe the feed of the rest of the prompt (dms "
                              "with decoding = true); run such cells on the cpu device");
}

void InferenceEngine::append_restore_rows(SequenceCache& cache,
                                          const methods::RestoreArtefacts& artefacts) {
  (void)cache;
  (void)artefacts;
  throw std::invalid_argument("the " + std::string(device_name(device())) +
                              " engine cannot run RestoreKV's LoRA restore pass; run such cells "
                              "on the cpu device");
}

void check_selection_shape(const methods::Selection& selection, int num_layers, int num_kv_heads) {
  if (selection.kept.size() != static_cast<std::size_t>(num_layers)) {
    throw std::invalid_argument("the selection has " + std::to_string(selection.kept.size()) +
                                " layers, the model " + std::to_string(num_layers));
  }
  for (std::size_t layer = 0; layer < selection.kept.size(); ++layer) {
    if (selection.kept[layer].size() != static_cast<std::size_t>(num_kv_heads)) {
      throw std::invalid_argument("layer " + std::to_string(layer) + " of the selection has " +
                                  std::to_string(selection.kept[layer].size()) +
                                  " KV heads, the model " + std::to_string(num_kv_heads));
    }
  }
}

}  // namespace kvaudit::unit
