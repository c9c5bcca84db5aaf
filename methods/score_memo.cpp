#include "methods/score_memo.h"

namespace kvaudit::methods {

std::shared_ptr<const std::vector<float>> ScoreMemo::get_or_compute(
    const Scorer& scorer, const LayerCapture& layer,
    const std::function<std::vector<float>()>& compute) {
  const Key key{&scorer, layer.layer, layer.length,
                layer.keys.empty() ? nullptr : layer.keys.front().data()};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  }
  auto scores = std::make_shared<const std::vector<float>>(compute());
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.emplace(key, std::move(scores)).first->second;
}

std::size_t ScoreMemo::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace kvaudit::methods
