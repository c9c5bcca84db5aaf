// BlockMethod: a scorer's top-k taken block by block (block-iterative eviction simulated after a
// full prefill), over any scorer that reads only keys and values.
//
// Citation: KeyDiff (Park et al. 2025, "KeyDiff: Key Similarity-Based KV Cache Eviction for
// Long-Context LLM Inference in Resource-Constrained Environments", arXiv 2504.15364), whose block
// prompt processing kvpress simulates; kvpress 0.5.5 kvpress/presses/block_press.py BlockPress.
//
// Formula, per layer and KV head, with n = max(1, floor(L·(1−cr))) (kvpress compute_n_kept) and
// B = block_size if block_size < L else L:
//   kept = [0, 1, ..., n−1]
//   for i = n, n+B, n+2B, ... < L:
//     candidates = kept (in the order of the previous step's top-k) followed by i .. min(i+B, L)−1
//     s          = the scorer's scores of the candidates alone, as if they were the whole cache
//                  (index c of the sub-cache = candidates[c]; scored for the cell's budget)
//     kept       = candidates[torch.topk(s, n).indices]  (torch's CPU tie order, top_k.h)
//   kept[ℓ][h] = sorted(kept).
// cr = 0 keeps everything (kvpress returns before the loop); n ≥ L: no step, the first n stay.
//
// The scorer: kvpress hands the inner press the gathered keys and values — and hidden states
// gathered in per-head slices, whose window queries would be rotated at the prefill's last
// positions whatever block is scored — so only scorers that read keys and values alone are
// faithful over several steps: select() refuses scorers with an observation window or that read
// attention column sums, query moments or all queries (reads_only_subset_fields; knorm, keydiff,
// cur, lagkv, streaming_llm are accepted; snapkv, tova, expected_attention are refused) unless the
// cell has at most one step (n + B ≥ L), whose candidates are 0..L−1 in order: then the result is
// the scorer's own top-k (ScorerMethod), for any scorer. block(keydiff) is the same selection as
// keydiff variant "block" (methods/keydiff.h), which stays as it was.
#pragma once

#include <memory>
#include <span>

#include "methods/method.h"
#include "methods/scorer_wrapper.h"

namespace kvaudit::methods {

class BlockMethod : public ScorerWrapperMethod {
 public:
  BlockMethod(std::shared_ptr<const Scorer> scorer, int block_size);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;

 private:
  int block_size_;
};

}  // namespace kvaudit::methods
