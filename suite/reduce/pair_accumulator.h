// Collects the cell pairs of a paired analysis into rows: per row, the expected pairs, whether any
// is unusable (missing or failed: the row is partial), and per instance the sums of both arms'
// utilities over the pairs the row pools (averaged when the row is read out). Under reuse the
// "instance" is (context, question) and a row with a reuse cell on either arm is clustered: its
// interval resamples contexts (paired_rows.h).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "suite/reduce/paired_rows.h"
#include "suite/reduce/study_frame.h"

namespace kvaudit::reduce {

using RowKey = std::vector<std::int64_t>;

class PairAccumulator {
 public:
  struct Sums {
    double a = 0;
    double b = 0;
    int pairs = 0;
  };
  struct Row {
    std::int64_t expected_pairs = 0;
    std::int64_t used_pairs = 0;
    std::int64_t excluded_pairs = 0;
    std::int64_t unusable_pairs = 0;  // missing or failed
    // (task, instance, question); question 0 outside the reuse protocol
    std::map<std::tuple<std::uint32_t, std::int64_t, std::uint32_t>, Sums> per_instance;
    bool clustered = false;       // some pair has a reuse cell: resample contexts
    bool forced_partial = false;  // an input outside the pairs (e.g. a baseline choice) is partial
    bool partial() const { return unusable_pairs > 0 || forced_partial; }
  };

  // One expected pair of `key` in the given states; adds the utilities when both are ok.
  void add(const RowKey& key, const FrameCell& a, const FrameCell& b);
  // Like add() with explicit utilities (e.g. the best baseline's score) and state.
  // `reuse`: the pair involves a reuse cell (the row becomes clustered).
  void add_values(const RowKey& key, std::uint32_t task, std::int64_t instance,
                  std::uint32_t question, bool reuse, CellState state, double a, double b);

  // Marks the row partial although its own pairs may be complete.
  void mark_partial(const RowKey& key) { rows_[key].forced_partial = true; }

  const std::map<RowKey, Row>& rows() const { return rows_; }
  // The row's instances with averaged arms.
  static std::vector<PairedInstance> instances(const Row& row);

 private:
  std::map<RowKey, Row> rows_;
};

// The combined state of a pair: ok when both are ok; excluded when either is excluded (the
// instance left the study); otherwise failed/missing (unusable).
CellState pair_state(CellState a, CellState b);

}  // namespace kvaudit::reduce
