// Philox4x32-10 known-answer vectors (Random123 kat_vectors; docs/design/statistics.md §Tests of
// the implementation, item 1), the counter/key
// layout of the bootstrap index stream, draw_index edge cases and a chi-square uniformity check.
#include "statistics/rng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvaudit::stats {
namespace {

TEST(Philox, KnownAnswerZeroCounterZeroKey) {
  const PhiloxBlock r = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r, (PhiloxBlock{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerAllOnes) {
  const PhiloxBlock r = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                      {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(r, (PhiloxBlock{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPiDigits) {
  const PhiloxBlock r = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                                      {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(r, (PhiloxBlock{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, KeyIsTheSeedLowWordFirst) {
  EXPECT_EQ(philox_key(0x299f31d0a4093822ull), (PhiloxKey{0xa4093822u, 0x299f31d0u}));
}

TEST(Philox, WordsFollowTheDocumentedCounterLayout) {
  const std::uint64_t seed = 0x0123456789abcdefull;
  const auto words = philox_words(seed, 7, 3, 11, RandomPurpose::bootstrap_index);
  const PhiloxBlock block = philox4x32_10(
      {7, 3, 11, static_cast<std::uint32_t>(RandomPurpose::bootstrap_index)}, philox_key(seed));
  EXPECT_EQ(words[0], (std::uint64_t{block[1]} << 32) | block[0]);
  EXPECT_EQ(words[1], (std::uint64_t{block[3]} << 32) | block[2]);
}

TEST(Philox, ResampleIndicesAreAPureFunctionOfSeedStratumReplicateAndPosition) {
  const std::uint32_t size = 7;  // odd: the last index uses the first word of its block
  std::vector<std::uint32_t> indices(size);
  draw_resample_indices(42, 5, 9, RandomPurpose::bootstrap_index, size, indices.data());
  for (std::uint32_t i = 0; i < size; ++i) {
    const auto words = philox_words(42, 9, i / 2, 5, RandomPurpose::bootstrap_index);
    EXPECT_EQ(indices[i], draw_index(words[i % 2], size)) << "i = " << i;
  }
  std::vector<std::uint32_t> other(size);
  draw_resample_indices(42, 6, 9, RandomPurpose::bootstrap_index, size, other.data());
  EXPECT_NE(indices, other) << "a different stratum must give a different resample";
}

TEST(DrawIndex, MapsTheWordRangeOntoZeroToNMinusOne) {
  EXPECT_EQ(draw_index(0, 20), 0u);
  EXPECT_EQ(draw_index(~std::uint64_t{0}, 20), 19u);
  EXPECT_EQ(draw_index(std::uint64_t{1} << 63, 20), 10u);
  EXPECT_EQ(draw_index(~std::uint64_t{0}, 1), 0u);
  EXPECT_EQ(draw_index(~std::uint64_t{0}, ~std::uint64_t{0}), ~std::uint64_t{0} - 1);
}

TEST(DrawIndex, ChiSquareUniformityOverTwentyCells) {
  // 10^6 draws into 20 cells: chi-square with 19 degrees of freedom; the 0.999 quantile is 43.82.
  constexpr std::uint32_t cells = 20;
  constexpr std::uint32_t draws = 1000000;
  std::vector<std::int64_t> counts(cells, 0);
  std::vector<std::uint32_t> indices(cells);
  for (std::uint32_t b = 0; b < draws / cells; ++b) {
    draw_resample_indices(20240601, 3, b, RandomPurpose::bootstrap_index, cells, indices.data());
    for (std::uint32_t index : indices) ++counts[index];
  }
  const double expected = static_cast<double>(draws) / cells;
  double chi_square = 0;
  for (std::int64_t count : counts) {
    const double diff = static_cast<double>(count) - expected;
    chi_square += diff * diff / expected;
  }
  RecordProperty("chi_square_19", std::to_string(chi_square));
  EXPECT_LT(chi_square, 43.82);
  EXPECT_GT(chi_square, 5.41);  // the 0.001 quantile: too uniform would be suspicious too
}

}  // namespace
}  // namespace kvaudit::stats
