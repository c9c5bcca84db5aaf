// BPE merge table and the merge loop of HF tokenizers (models/bpe/word.rs, Word::merge_all).
//
// A word starts as one symbol per character. A min-heap holds every adjacent pair that has a merge,
// keyed by (rank, position of the left symbol); the lowest rank wins and, among equal ranks, the
// leftmost pair. Popping a pair that is stale (a neighbour was merged away or changed) does
// nothing; merging a pair pushes the new pairs it forms with its left and right neighbours. The
// result equals "repeatedly merge the lowest-ranked adjacent pair, leftmost first".
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvaudit::model {

class BpeMergeTable {
 public:
  struct Merge {
    std::int32_t rank = 0;
    std::int32_t merged_id = 0;
  };

  // Registers left+right -> merged_id at `rank`. A pair given twice keeps the later entry, as HF's
  // HashMap collect does.
  void add(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged_id);
  const Merge* find(std::int32_t left, std::int32_t right) const;
  std::size_t size() const { return merges_.size(); }

  // Merges `symbols` (token ids) in place.
  void apply(std::vector<std::int32_t>& symbols) const;

 private:
  static std::uint64_t key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  std::unordered_map<std::uint64_t, Merge> merges_;
};

}  // namespace kvaudit::model
