// DmsMethod (dms.h).
#include "methods/dms.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "methods/bf16_rounding.h"
#include "methods/capture_checks.h"
#include "methods/scorer_method.h"

namespace kvaudit::methods {

DmsMethod::DmsMethod(std::shared_ptr<const Scorer> scorer, int sliding_window_size, bool decoding)
    : ScorerWrapperMethod("dms", std::move(scorer)),
      sliding_window_size_(sliding_window_size),
      decoding_(decoding) {
  if (!scorer_) throw std::invalid_argument("dms: null scorer");
  if (sliding_window_size_ < 1)
    throw std::invalid_argument("dms: sliding_window_size must be >= 1, not " +
                                std::to_string(sliding_window_size_));
  if (decoding_ && !scorer_->per_entry())
    throw std::invalid_argument(
        "dms: decoding = true scores each new entry on its own as it arrives, which needs a "
        "per-entry scorer (knorm, kvzap); " +
        scorer_->name() + "'s scores read other entries or query windows");
}

float dms_threshold(const Scorer& scorer, double threshold, bool model_is_bf16) {
  // torch compares a tensor with a Python float in the tensor's dtype: T is cast to f32, or to
  // bf16 when the scorer's kvpress scores are a bf16 model's dtype.
  return maybe_bf16(static_cast<float>(threshold), model_is_bf16 && scorer.scores_in_model_dtype());
}

Selection DmsMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                            const SelectionContext& context) const {
  const int length = check_layers(layers, name());
  if (!std::isfinite(budget.threshold))
    throw std::invalid_argument(name() + ": the threshold must be finite");
  const auto l = static_cast<std::size_t>(length);
  const std::int64_t scored = std::max<std::int64_t>(0, length - sliding_window_size_);
  const std::size_t window =
      std::min<std::size_t>(l, static_cast<std::size_t>(sliding_window_size_));
  Selection selection;
  for (const auto& layer : layers) {
    const auto heads = static_cast<std::size_t>(layer.num_kv_heads);
    std::vector<std::vector<std::int32_t>> kept(heads);
    if (scored == 0 && !decoding_) {
      for (auto& head : kept)
        for (std::int32_t t = 0; t < length; ++t) head.push_back(t);
      selection.kept.push_back(std::move(kept));
      continue;
    }
    // kvpress calls the wrapped press's score() with its own compression ratio, which is 0.
    const std::vector<float> scores = score_layer(*scorer_, layer, Budget{}, context);
    const float threshold = dms_threshold(*scorer_, budget.threshold, layer.model_is_bf16);
    for (std::size_t h = 0; h < heads; ++h) {
      const float* row = scores.data() + h * l;
      for (std::int64_t t = 0; t < length; ++t)
        if (t >= scored || !dms_evicts(row[t], threshold))
          kept[h].push_back(static_cast<std::int32_t>(t));
    }
    selection.kept.push_back(std::move(kept));
    if (decoding_) {
      std::vector<std::vector<float>> last(heads);
      for (std::size_t h = 0; h < heads; ++h)
        last[h].assign(scores.begin() + static_cast<std::ptrdiff_t>(h * l + l - window),
                       scores.begin() + static_cast<std::ptrdiff_t>((h + 1) * l));
      selection.window_scores.push_back(std::move(last));
    }
  }
  return selection;
}

}  // namespace kvaudit::methods
