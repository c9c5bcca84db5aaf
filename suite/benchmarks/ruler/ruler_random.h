// Random numbers for the RULER generator: Philox4x32-10 (statistics/rng.h) with a counter that
// makes every draw a pure function of (study seed, task, nominal length, instance index, stream,
// draw no.). Nothing depends on how many ranks generate, which instance range is asked for or in
// which order, so instances 10..19 generated alone equal instances 10..19 of a run over 0..29.
//
//   key     = philox_key(seed)
//   counter = (block number, instance index, nominal length, tag 'R' << 24 | task id << 8 | stream)
//   each block yields two 64-bit words, used in order.
//
// Streams separate draws by purpose so that what does not depend on the haystack size (needle keys
// and values, queries, cwe's common words) is identical whatever size the length search settles on
// (and so whatever the tokenizer), and only the layout (positions, fillers) depends on the size.
// RULER's own "fresh random.Random(seed)" shuffles, which repeat the same permutation for every
// sample with a list of the same length, use the `fixed` stream of the reserved instance
// kFixedInstance (docs/design/benchmarks.md §RULER random numbers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvaudit::benchmarks::ruler {

enum class RulerStream : std::uint32_t {
  content = 1,  // size-independent draws of an instance
  layout = 2,   // draws that depend on the haystack size (re-started for every size tried)
  fewshot = 3,  // cwe's few-shot example, vt's ICL randomization
  fixed = 4,    // RULER's random.Random(seed) shuffles
  example = 5,  // vt's one ICL example (one per seed, task, length)
};

// The instance index of draws shared by all instances (fixed shuffles, the vt ICL example, the
// probe that estimates the haystack size).
inline constexpr std::uint32_t kFixedInstance = 0xffffffffu;
inline constexpr std::uint32_t kProbeInstance = 0xfffffffeu;

class RulerRng {
 public:
  RulerRng(std::uint64_t seed, std::uint32_t task_id, std::uint32_t length, std::uint32_t instance,
           RulerStream stream);

  std::uint64_t next_u64();
  // Uniform in {0, …, n−1} (n ≥ 1): ⌊u·n/2⁶⁴⌋, bias ≤ n/2⁶⁴.
  std::uint64_t below(std::uint64_t n);
  // Uniform in [lo, hi] (inclusive).
  std::int64_t between(std::int64_t lo, std::int64_t hi);
  // `k` characters drawn uniformly from `alphabet`.
  std::string letters(std::string_view alphabet, std::size_t k);
  // 32 lower-case hex digits of 128 random bits formatted as a version-4 UUID, as Python's
  // str(uuid.UUID(int=getrandbits(128), version=4)) does (version and variant bits forced).
  std::string uuid4();

  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher–Yates
    for (std::size_t i = v.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(below(i));
      std::swap(v[i - 1], v[j]);
    }
  }
  // `k` distinct indices of {0, …, n−1} in draw order (k ≤ n). The first j of k draws equal the
  // k' = j draws of the same stream: growing k never changes the earlier picks.
  std::vector<std::size_t> sample_indices(std::size_t n, std::size_t k);

 private:
  std::uint32_t key_[2];
  std::uint32_t instance_;
  std::uint32_t length_;
  std::uint32_t tag_;
  std::uint32_t block_ = 0;
  std::uint64_t words_[2] = {0, 0};
  int used_ = 2;
};

}  // namespace kvaudit::benchmarks::ruler
