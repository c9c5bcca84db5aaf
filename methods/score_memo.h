// ScoreMemo: scores computed once per (scorer, layer capture) and reused by every cell of a unit
// that asks for them again — the fan-out's cells differ only in the budget, and most scorers'
// scores do not depend on it (kvpress computes them per press call; re-scoring for every ratio
// would redo identical work).
//
// The unit runner creates one memo per unit and passes it in SelectionContext::memo; selection
// code (score_layer, scorer_method.h) consults it for scorers whose scores depend neither on the
// budget (Scorer::scores_depend_on_budget: StreamingLLM, CriticalKV) nor on the cell
// (Scorer::scores_depend_on_cell: Random). Results are identical with or without a memo.
// Thread-safe: cells may be selected concurrently; a miss computes outside the lock (two threads
// may compute the same scores once each; the first stored wins, both are equal).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
#include <vector>

#include "methods/layer_capture.h"

namespace kvaudit::methods {

class Scorer;

class ScoreMemo {
 public:
  // The scores of `scorer` on `layer`, computed by `compute` on a miss. The key is the scorer's
  // identity and the capture's (layer index, length L, key storage), which identify the view.
  std::shared_ptr<const std::vector<float>> get_or_compute(
      const Scorer& scorer, const LayerCapture& layer,
      const std::function<std::vector<float>()>& compute);

  std::size_t size() const;

 private:
  using Key = std::tuple<const Scorer*, int, int, const float*>;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const std::vector<float>>> entries_;
};

}  // namespace kvaudit::methods
