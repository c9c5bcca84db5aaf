// difflib.SequenceMatcher(None, a, b).ratio(); see difflib_ratio.h.
#include "suite/benchmarks/metrics/difflib_ratio.h"

#include <array>
#include <unordered_map>
#include <vector>

namespace kvaudit::metrics {
namespace {

struct Match {
  std::size_t i;
  std::size_t j;
  std::size_t size;
};

class SequenceMatcher {
 public:
  SequenceMatcher(std::u32string_view a, std::u32string_view b) : a_(a), b_(b) {
    for (std::size_t j = 0; j < b_.size(); ++j) b2j_[b_[j]].push_back(j);
    const std::size_t n = b_.size();
    if (n >= 200) {  // autojunk: drop the popular elements
      const std::size_t ntest = n / 100 + 1;
      for (auto it = b2j_.begin(); it != b2j_.end();) {
        it = it->second.size() > ntest ? b2j_.erase(it) : std::next(it);
      }
    }
  }

  std::size_t matching_characters() const {
    std::size_t total = 0;
    std::vector<std::array<std::size_t, 4>> queue{{0, a_.size(), 0, b_.size()}};
    while (!queue.empty()) {
      const auto [alo, ahi, blo, bhi] = queue.back();
      queue.pop_back();
      const Match match = find_longest_match(alo, ahi, blo, bhi);
      if (match.size == 0) continue;
      total += match.size;
      if (alo < match.i && blo < match.j) queue.push_back({alo, match.i, blo, match.j});
      if (match.i + match.size < ahi && match.j + match.size < bhi) {
        queue.push_back({match.i + match.size, ahi, match.j + match.size, bhi});
      }
    }
    return total;
  }

 private:
  Match find_longest_match(std::size_t alo, std::size_t ahi, std::size_t blo,
                           std::size_t bhi) const {
    Match best{alo, blo, 0};
    // j2len[j + 1] = length of the match ending at a[i - 1], b[j] (the key is shifted by one so
    // that Python's j2len.get(j - 1, 0) needs no negative key).
    std::unordered_map<std::size_t, std::size_t> j2len;
    std::unordered_map<std::size_t, std::size_t> new_j2len;
    for (std::size_t i = alo; i < ahi; ++i) {
      new_j2len.clear();
      const auto found = b2j_.find(a_[i]);
      if (found != b2j_.end()) {
        for (const std::size_t j : found->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          const auto previous = j2len.find(j);  // key j == Python's j - 1 shifted
          const std::size_t k = (previous == j2len.end() ? 0 : previous->second) + 1;
          new_j2len[j + 1] = k;
          if (k > best.size) best = {i - k + 1, j - k + 1, k};
        }
      }
      std::swap(j2len, new_j2len);
    }
    while (best.i > alo && best.j > blo && a_[best.i - 1] == b_[best.j - 1]) {
      --best.i;
      --best.j;
      ++best.size;
    }
    while (best.i + best.size < ahi && best.j + best.size < bhi &&
           a_[best.i + best.size] == b_[best.j + best.size]) {
      ++best.size;
    }
    return best;
  }

  std::u32string_view a_;
  std::u32string_view b_;
  std::unordered_map<char32_t, std::vector<std::size_t>> b2j_;
};

}  // namespace

std::size_t difflib_matching_characters(std::u32string_view a, std::u32string_view b) {
  return SequenceMatcher(a, b).matching_characters();
}

double difflib_ratio(std::u32string_view a, std::u32string_view b) {
  const std::size_t length = a.size() + b.size();
  if (length == 0) return 1.0;
  return 2.0 * static_cast<double>(difflib_matching_characters(a, b)) / static_cast<double>(length);
}

}  // namespace kvaudit::metrics
