// Deterministic random numbers for the statistics tests' simulations: Philox4x32-10 with the
// "simulation" purpose tag, so that simulated data never shares a stream with bootstrap indices.
// Word w of stream s under seed k is philox_words(k, s, w / 2, 0, simulation)[w % 2].
#pragma once

#include <array>
#include <cstdint>

#include "statistics/rng.h"

namespace kvaudit::stats::testing {

class SimulationStream {
 public:
  SimulationStream(std::uint64_t seed, std::uint32_t stream) : seed_(seed), stream_(stream) {}

  std::uint64_t next_word() {
    if (have_ == 0) {
      words_ = philox_words(seed_, stream_, pair_++, 0, RandomPurpose::simulation);
      have_ = 2;
    }
    return words_[static_cast<std::size_t>(2 - have_--)];
  }
  double uniform() { return unit_double(next_word()); }                        // [0, 1)
  bool bernoulli(double p) { return uniform() < p; }                           // P(true) = p
  std::uint64_t below(std::uint64_t n) { return draw_index(next_word(), n); }  // {0..n-1}

 private:
  std::uint64_t seed_;
  std::uint32_t stream_;
  std::uint32_t pair_ = 0;
  std::array<std::uint64_t, 2> words_{};
  int have_ = 0;
};

}  // namespace kvaudit::stats::testing
