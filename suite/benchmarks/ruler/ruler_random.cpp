// RulerRng: see ruler_random.h.
#include "suite/benchmarks/ruler/ruler_random.h"

#include <string_view>
#include <unordered_map>

#include "statistics/rng.h"

namespace kvaudit::benchmarks::ruler {

RulerRng::RulerRng(std::uint64_t seed, std::uint32_t task_id, std::uint32_t length,
                   std::uint32_t instance, RulerStream stream)
    : key_{static_cast<std::uint32_t>(seed & 0xffffffffu), static_cast<std::uint32_t>(seed >> 32)},
      instance_(instance),
      length_(length),
      tag_((0x52u << 24) | ((task_id & 0xffffu) << 8) |
           (static_cast<std::uint32_t>(stream) & 0xffu)) {}

std::uint64_t RulerRng::next_u64() {
  if (used_ == 2) {
    const auto block =
        stats::philox4x32_10({block_++, instance_, length_, tag_}, {key_[0], key_[1]});
    words_[0] = (static_cast<std::uint64_t>(block[1]) << 32) | block[0];
    words_[1] = (static_cast<std::uint64_t>(block[3]) << 32) | block[2];
    used_ = 0;
  }
  return words_[used_++];
}

std::uint64_t RulerRng::below(std::uint64_t n) { return stats::draw_index(next_u64(), n); }

std::int64_t RulerRng::between(std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
}

std::string RulerRng::letters(std::string_view alphabet, std::size_t k) {
  std::string s(k, ' ');
  for (auto& c : s) c = alphabet[static_cast<std::size_t>(below(alphabet.size()))];
  return s;
}

std::string RulerRng::uuid4() {
  std::uint64_t hi = next_u64();
  std::uint64_t lo = next_u64();
  hi = (hi & ~0xf000ull) | 0x4000ull;              // version 4
  lo = (lo & ~(0xc0ull << 56)) | (0x80ull << 56);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(36);
  for (int i = 0; i < 32; ++i) {
    const std::uint64_t word = i < 16 ? hi : lo;
    const int shift = 60 - 4 * (i % 16);
    s += kHex[(word >> shift) & 0xf];
    if (i == 7 || i == 11 || i == 15 || i == 19) s += '-';
  }
  return s;
}

std::vector<std::size_t> RulerRng::sample_indices(std::size_t n, std::size_t k) {
  // A partial Fisher–Yates over a virtual identity array (only swapped slots are stored).
  std::unordered_map<std::size_t, std::size_t> swapped;
  const auto at = [&](std::size_t i) {
    const auto it = swapped.find(i);
    return it == swapped.end() ? i : it->second;
  };
  std::vector<std::size_t> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(below(n - i));
    const std::size_t vi = at(i);
    const std::size_t vj = at(j);
    out.push_back(vj);
    swapped[j] = vi;
    swapped[i] = vj;
  }
  return out;
}

}  // namespace kvaudit::benchmarks::ruler
