// RestoreKvMethod (restorekv.h).
#include "methods/restorekv.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kvaudit::methods {
namespace {

KvzipParams restorekv_reconstruction_params(const RestoreKvParams& p) {
  return KvzipParams{.variant = p.variant,
                     .layerwise = p.layerwise,
                     .n_sink = p.n_sink,
                     .chunk_size = p.chunk_size};
}

}  // namespace

RestoreKvMethod::RestoreKvMethod(RestoreKvParams params)
    : RestoreKvMethod(params, std::make_shared<const RestoreArtefacts>(read_restorekv_artefacts(
                                  params.restore_embeddings, params.adapter))) {}

RestoreKvMethod::RestoreKvMethod(RestoreKvParams params,
                                 std::shared_ptr<const RestoreArtefacts> artefacts)
    : params_(std::move(params)),
      reconstruction_(restorekv_reconstruction_params(params_)),
      artefacts_(std::move(artefacts)) {
  if (!artefacts_ || artefacts_->tokens < 1)
    throw std::invalid_argument(name() + ": no restore tokens");
}

double RestoreKvMethod::effective_compression(double compression, int restore_tokens, int length) {
  // kvpress compress_post: min(1.0, requested_ratio + num_restore_tokens / context_length).
  return std::min(1.0,
                  compression + static_cast<double>(restore_tokens) / static_cast<double>(length));
}

Selection RestoreKvMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                  const SelectionContext& context) const {
  if (!(budget.compression >= 0.0 && budget.compression < 1.0))
    throw std::invalid_argument(name() + ": compression " + std::to_string(budget.compression) +
                                " is outside [0, 1)");
  // cr = 0: kvpress's KVzip skips everything after the prefill — no restore rows either.
  if (budget.compression == 0.0)
    return reconstruction_.select_named(layers, budget, context, name());
  // (the artefacts' fit to the model is checked by the engine that appends the rows)
  const int length = layers.empty() ? 0 : layers.front().length;
  const Budget matched{
      .compression = effective_compression(budget.compression, artefacts_->tokens, length),
      .threshold = budget.threshold};
  Selection selection = reconstruction_.select_named(layers, matched, context, name(),
                                                     /*allow_full_compression=*/true);
  selection.restore_rows = artefacts_;
  return selection;
}

}  // namespace kvaudit::methods
