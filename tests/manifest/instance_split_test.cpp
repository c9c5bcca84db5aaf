// The preregistered calibration/test split: a seeded permutation (Philox4x32-10).
#include "suite/manifest/instance_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace kvaudit::manifest {
namespace {

TEST(InstanceSplit, PermutationIsAPermutationAndDeterministic) {
  const auto p = seeded_permutation(42, "split/b/t", 1000);
  std::vector<std::int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_EQ(p, seeded_permutation(42, "split/b/t", 1000));
  EXPECT_NE(p, iota);
  EXPECT_NE(p, seeded_permutation(43, "split/b/t", 1000));
  EXPECT_NE(p, seeded_permutation(42, "split/b/u", 1000));
}

TEST(InstanceSplit, CountsFollowTheContract) {
  const auto s = split_instances(7, "longbench", "trec", 200, 100, 60);
  EXPECT_EQ(std::count(s.begin(), s.end(), Split::calibration), 100);
  EXPECT_EQ(std::count(s.begin(), s.end(), Split::test), 60);
  EXPECT_EQ(std::count(s.begin(), s.end(), Split::none), 40);
}

TEST(InstanceSplit, EveryIndexIsEquallyLikelyToComeFirst) {
  // Over 4000 seeds, each of 8 positions should be first about 500 times (chi-square, 7 dof;
  // 24.3 is the 0.999 quantile).
  std::vector<int> first(8, 0);
  for (std::uint64_t seed = 0; seed < 4000; ++seed)
    first[static_cast<std::size_t>(seeded_permutation(seed, "x", 8)[0])]++;
  double chi2 = 0;
  for (int c : first) chi2 += (c - 500.0) * (c - 500.0) / 500.0;
  EXPECT_LT(chi2, 24.3);
}

TEST(InstanceSplit, EmptyAndSingleton) {
  EXPECT_TRUE(seeded_permutation(1, "x", 0).empty());
  EXPECT_EQ(seeded_permutation(1, "x", 1), std::vector<std::int64_t>{0});
}

}  // namespace
}  // namespace kvaudit::manifest
