// HF tokenizers' priority-queue BPE merge loop over token ids.
#include "runners/model/tokenizer/bpe_merges.h"

#include <queue>

namespace kvaudit::model {

void BpeMergeTable::add(std::int32_t left, std::int32_t right, std::int32_t rank,
                        std::int32_t merged_id) {
  merges_[key(left, right)] = Merge{rank, merged_id};
}

const BpeMergeTable::Merge* BpeMergeTable::find(std::int32_t left, std::int32_t right) const {
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeMergeTable::apply(std::vector<std::int32_t>& symbols) const {
  const std::size_t n = symbols.size();
  if (n < 2) return;
  struct Symbol {
    std::int32_t id;
    std::int64_t prev;  // -1: none
    std::int64_t next;  // -1: none
    bool alive;
  };
  struct Candidate {
    std::int32_t rank;
    std::size_t position;
    std::int32_t merged_id;
    // std::priority_queue is a max-heap: "less" means "popped later".
    bool operator<(const Candidate& other) const {
      if (rank != other.rank) return rank > other.rank;
      return position > other.position;
    }
  };
  std::vector<Symbol> word(n);
  for (std::size_t i = 0; i < n; ++i) {
    word[i] = Symbol{symbols[i], static_cast<std::int64_t>(i) - 1,
                     i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1, true};
  }
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
  for (std::size_t i = 0; i + 1 < n; ++i) {
    if (const Merge* m = find(symbols[i], symbols[i + 1])) {
      queue.push(Candidate{m->rank, i, m->merged_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = word[top.position];
    if (!left.alive || left.next < 0) continue;
    const auto right_position = static_cast<std::size_t>(left.next);
    const Symbol right = word[right_position];
    const Merge* current = find(left.id, right.id);
    if (current == nullptr || current->merged_id != top.merged_id) continue;  // stale entry
    left.id = top.merged_id;
    left.next = right.next;
    word[right_position].alive = false;
    if (right.next >= 0)
      word[static_cast<std::size_t>(right.next)].prev = static_cast<std::int64_t>(top.position);
    if (left.prev >= 0) {
      const auto prev_position = static_cast<std::size_t>(left.prev);
      if (const Merge* m = find(word[prev_position].id, left.id)) {
        queue.push(Candidate{m->rank, prev_position, m->merged_id});
      }
    }
    if (left.next >= 0) {
      if (const Merge* m = find(left.id, word[static_cast<std::size_t>(left.next)].id)) {
        queue.push(Candidate{m->rank, top.position, m->merged_id});
      }
    }
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (word[i].alive) symbols[out++] = word[i].id;
  }
  symbols.resize(out);
}

}  // namespace kvaudit::model
