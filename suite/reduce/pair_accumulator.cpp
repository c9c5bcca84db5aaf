// Collecting cell pairs into rows (see pair_accumulator.h).
#include "suite/reduce/pair_accumulator.h"

namespace kvaudit::reduce {

CellState pair_state(CellState a, CellState b) {
  if (a == CellState::ok && b == CellState::ok) return CellState::ok;
  if (a == CellState::excluded || b == CellState::excluded) return CellState::excluded;
  if (a == CellState::missing || b == CellState::missing) return CellState::missing;
  return CellState::failed;
}

void PairAccumulator::add(const RowKey& key, const FrameCell& a, const FrameCell& b) {
  add_values(key, a.task, a.instance, a.question, is_reuse(a) || is_reuse(b),
             pair_state(a.state, b.state), a.score, b.score);
}

void PairAccumulator::add_values(const RowKey& key, std::uint32_t task, std::int64_t instance,
                                 std::uint32_t question, bool reuse, CellState state, double a,
                                 double b) {
  Row& row = rows_[key];
  ++row.expected_pairs;
  if (reuse) row.clustered = true;
  switch (state) {
    case CellState::ok: {
      ++row.used_pairs;
      Sums& s = row.per_instance[{task, instance, question}];
      s.a += a;
      s.b += b;
      ++s.pairs;
      break;
    }
    case CellState::excluded:
      ++row.excluded_pairs;
      break;
    case CellState::failed:
    case CellState::missing:
      ++row.unusable_pairs;
      break;
  }
}

std::vector<PairedInstance> PairAccumulator::instances(const Row& row) {
  std::vector<PairedInstance> out;
  out.reserve(row.per_instance.size());
  for (const auto& [key, s] : row.per_instance) {
    PairedInstance p;
    std::tie(p.task, p.instance, p.question) = key;
    p.a = s.pairs == 1 ? s.a : s.a / s.pairs;
    p.b = s.pairs == 1 ? s.b : s.b / s.pairs;
    p.pairs = s.pairs;
    out.push_back(p);
  }
  return out;
}

}  // namespace kvaudit::reduce
