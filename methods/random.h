// RandomScorer: uniform random scores, s(j) ~ U[0, 1) (kvpress RandomPress, docs/design/kvpress.md
// §RandomPress). kvpress draws from torch's global RNG, which cannot be reproduced outside
// PyTorch; ours is Philox4x32-10 (Random123) keyed by the cell so every run of a cell evicts the
// same tokens:
//   key     = (seed low 32 bits, seed high 32 bits)          SelectionContext::seed
//   counter = (j, layer << 16 | kv_head, cell_key low, cell_key high)
//   s(j)    = (word0 >> 8) · 2⁻²⁴                           (24 bits: exact in f32)
// cell_key is the cell's selection key (suite/manifest/expansion.h selection_key): the unit's
// content without the attention backend, the method config, the budget and the protocol — so the
// same cell under sdpa and eager (and on any device) keeps the same positions and a backend
// comparison of random rows compares scoring only. Records of schema version < 4 were keyed by
// the cell id, which includes the backend (docs/RECORDS.md §Versions).
// Parity with kvpress is statistical only (kept fraction per head is exact: floor(L(1−cr))).
#pragma once

#include "methods/method.h"

namespace kvaudit::methods {

class RandomScorer : public Scorer {
 public:
  void score(const LayerCapture& layer, const SelectionContext& context,
             std::span<float> scores) const override;
  bool scores_depend_on_cell() const override { return true; }
  std::string name() const override { return "random"; }
};

}  // namespace kvaudit::methods
