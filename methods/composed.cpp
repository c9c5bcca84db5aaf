// ComposedMethod (composed.h).
#include "methods/composed.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "methods/capture_checks.h"
#include "methods/capture_subset.h"
#include "methods/scorer_method.h"
#include "methods/top_k.h"
#include "methods/wrapper_budgets.h"

namespace kvaudit::methods {

ComposedMethod::ComposedMethod(std::vector<std::shared_ptr<const Scorer>> presses,
                               std::vector<double> compression_ratios,
                               std::shared_ptr<const ThinkMethod> key_channel_stage)
    : presses_(std::move(presses)),
      compression_ratios_(std::move(compression_ratios)),
      key_channel_stage_(std::move(key_channel_stage)) {
  const std::size_t stages = presses_.size() + (key_channel_stage_ ? 1 : 0);
  if (stages == 0) throw std::invalid_argument("composed: no presses");
  if (stages != compression_ratios_.size())
    throw std::invalid_argument("composed: " + std::to_string(stages) + " presses but " +
                                std::to_string(compression_ratios_.size()) +
                                " compression ratios (one per press)");
  for (std::size_t i = 0; i < presses_.size(); ++i) {
    if (!presses_[i]) throw std::invalid_argument("composed: null press");
    if (!(compression_ratios_[i] >= 0.0 && compression_ratios_[i] < 1.0))
      throw std::invalid_argument("composed: every compression ratio must be in [0, 1)");
    if (i > 0 && !reads_only_subset_fields(*presses_[i]))
      throw std::invalid_argument(
          "composed: press " + std::to_string(i + 1) + " '" + presses_[i]->name() +
          "' reads attention column sums, query moments or all-queries rows of the full "
          "prefill, which do not describe the cache an earlier press pruned; put it first");
  }
  if (key_channel_stage_ &&
      std::abs(compression_ratios_.back() - key_channel_stage_->reported_compression()) >
          kFixedCompressionTolerance) {
    std::ostringstream message;
    message.precision(17);
    message << "composed: the think press's compression ratio must be the one ThinKPress "
               "reports, key_channel_compression_ratio / 2 = "
            << key_channel_stage_->reported_compression() << ", not " << compression_ratios_.back();
    throw std::invalid_argument(message.str());
  }
}

int ComposedMethod::window_needed() const {
  int window = 0;
  for (const auto& p : presses_) window = std::max(window, p->window_needed());
  if (key_channel_stage_) window = std::max(window, key_channel_stage_->window_needed());
  return window;
}
bool ComposedMethod::needs_column_sums() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_column_sums(); });
}
bool ComposedMethod::needs_query_moments() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_query_moments(); });
}
bool ComposedMethod::needs_all_queries() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_all_queries(); });
}
bool ComposedMethod::needs_attention_input() const {
  return std::any_of(presses_.begin(), presses_.end(),
                     [](const auto& p) { return p->needs_attention_input(); });
}
std::string ComposedMethod::name() const {
  std::string names;
  for (const auto& p : presses_) names += (names.empty() ? "" : ", ") + p->name();
  if (key_channel_stage_) names += (names.empty() ? "" : ", ") + key_channel_stage_->name();
  return "composed(" + names + ")";
}

Selection ComposedMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                 const SelectionContext& context) const {
  const int L = check_layers(layers, name());
  check_fixed_compression(name(), composed_compression(compression_ratios_), budget.compression);
  SelectionContext subset_context = context;
  subset_context.memo = nullptr;  // scores of a pruned cache are not the layer's scores
  Selection selection;
  for (const auto& layer : layers) {
    const auto heads = static_cast<std::size_t>(layer.num_kv_heads);
    // positions[h][i]: the original position at cache index i of head h.
    std::vector<std::vector<std::int32_t>> positions = position_range(layer, 0, L);
    bool pruned = false;
    for (std::size_t p = 0; p < presses_.size(); ++p) {  // the scorers (ThinK's ratio is last)
      const double ratio = compression_ratios_[p];
      if (ratio == 0.0) continue;
      const Budget press_budget{.compression = ratio, .threshold = budget.threshold};
      const auto length = positions.front().size();
      std::vector<float> scores;
      if (!pruned) {
        scores = score_layer(*presses_[p], layer, press_budget, context);
      } else {
        const CaptureSubset cache(layer, positions);
        scores.resize(heads * length);
        presses_[p]->score_for_budget(cache.view(), press_budget, subset_context, scores);
      }
      const std::int64_t n_kept = kept_count(static_cast<std::int64_t>(length), ratio);
      std::vector<std::vector<std::int32_t>> next(heads);
      for (std::size_t h = 0; h < heads; ++h)
        for (const auto i :
             torch_top_k_ranked(std::span<const float>(scores).subspan(h * length, length), n_kept))
          next[h].push_back(positions[h][static_cast<std::size_t>(i)]);
      positions = std::move(next);
      pruned = true;
    }
    for (auto& head : positions) std::sort(head.begin(), head.end());
    // ThinK scores the channels over the keys the scorers kept (the mean ignores their order).
    if (key_channel_stage_)
      selection.zeroed_key_channels.push_back(
          key_channel_stage_->zeroed_channels(layer, &positions));
    selection.kept.push_back(std::move(positions));
  }
  const bool any_zeroed = std::any_of(
      selection.zeroed_key_channels.begin(), selection.zeroed_key_channels.end(),
      [](const auto& heads) {
        return std::any_of(heads.begin(), heads.end(), [](const auto& h) { return !h.empty(); });
      });
  if (!any_zeroed) selection.zeroed_key_channels.clear();  // nothing pruned: no cache edit
  return selection;
}

}  // namespace kvaudit::methods
