// The fast paths of the paired bootstrap against the plain definition, bit for bit:
// * draw_resample_indices (eight Philox counters per AVX2 step where the CPU has it) against
//   philox_words + draw_index, one word at a time (rng.h's layout);
// * BootstrapPlan's lane kernel (bootstrap_plan.h: parts transposed into 8/16/32-bit integer or
//   double lanes, all-zero parts skipped) against the scalar loop of paired_bootstrap.h's
//   definition: per stratum Σ_i d[idx_i] in the order i = 0, 1, …, integers in int64, doubles in
//   double, strata in ascending id;
// * sort_replicates against std::sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "statistics/paired_bootstrap.h"
#include "statistics/rng.h"

namespace kvaudit::stats {
namespace {

std::uint64_t bits(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TEST(BootstrapKernel, ResampleIndicesEqualTheWordByWordDefinition) {
  const std::vector<std::uint64_t> seeds = {0, 20250101, 0xfedcba9876543210ull};
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t n = 1; n <= 70; ++n) sizes.push_back(n);
  sizes.insert(sizes.end(), {255, 256, 257, 1000, 1201});
  std::size_t checked = 0;
  for (std::uint64_t seed : seeds) {
    for (std::uint32_t size : sizes) {
      for (std::uint32_t replicate : {0u, 1u, 49999u, 0xfffffffeu}) {
        const std::uint32_t stratum = size * 7 + 3;
        std::vector<std::uint32_t> indices(size);
        draw_resample_indices(seed, stratum, replicate, RandomPurpose::bootstrap_index, size,
                              indices.data());
        for (std::uint32_t i = 0; i < size; ++i) {
          const auto words =
              philox_words(seed, replicate, i / 2, stratum, RandomPurpose::bootstrap_index);
          ASSERT_EQ(indices[i], draw_index(words[i % 2], size))
              << "seed " << seed << ", size " << size << ", replicate " << replicate << ", i " << i;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3u * 4u * (70u * 71u / 2 + 255 + 256 + 257 + 1000 + 1201));
}

// Replicate b of a comparison by the definition (paired_bootstrap.h), one stratum at a time.
double reference_replicate(const PairedComparison& comparison, Aggregate aggregate,
                           std::uint64_t seed, std::uint32_t b) {
  bool integer = true;
  std::int64_t instances = 0;
  for (const PairedStratum& s : comparison.strata) {
    instances += static_cast<std::int64_t>(s.arm_a.size());
    for (std::size_t i = 0; i < s.arm_a.size(); ++i) {
      const double d = s.arm_a[i] - s.arm_b[i];
      if (!(d == std::nearbyint(d) && d >= -127 && d <= 127)) integer = false;
    }
  }
  std::vector<const PairedStratum*> ordered;
  for (const PairedStratum& s : comparison.strata) ordered.push_back(&s);
  std::sort(ordered.begin(), ordered.end(),
            [](const PairedStratum* x, const PairedStratum* y) { return x->id < y->id; });
  std::int64_t integer_total = 0;
  double total = 0;
  for (const PairedStratum* s : ordered) {
    const auto size = static_cast<std::uint32_t>(s->arm_a.size());
    std::vector<std::uint32_t> idx(size);
    for (std::uint32_t i = 0; i < size; ++i) {
      idx[i] = static_cast<std::uint32_t>(draw_index(
          philox_words(seed, b, i / 2, s->id, RandomPurpose::bootstrap_index)[i % 2], size));
    }
    if (integer) {
      std::int64_t sum = 0;
      for (std::uint32_t i = 0; i < size; ++i) {
        sum += static_cast<std::int64_t>(s->arm_a[idx[i]] - s->arm_b[idx[i]]);
      }
      if (aggregate == Aggregate::pooled) {
        integer_total += sum;
      } else {
        total += static_cast<double>(sum) / size;
      }
    } else {
      double sum = 0;
      for (std::uint32_t i = 0; i < size; ++i) sum += s->arm_a[idx[i]] - s->arm_b[idx[i]];
      total += aggregate == Aggregate::pooled ? sum : sum / size;
    }
  }
  if (aggregate == Aggregate::pooled) {
    return (integer ? static_cast<double>(integer_total) : total) / static_cast<double>(instances);
  }
  return total / static_cast<double>(comparison.strata.size());
}

// Deterministic pseudo-random values from the simulation stream.
struct Stream {
  std::uint64_t seed;
  std::uint32_t word = 0;
  double next() {
    const auto w = philox_words(seed, 0, word / 2, 0, RandomPurpose::simulation)[word % 2];
    ++word;
    return unit_double(w);
  }
};

// Strata with ids 0…4 of sizes 12, 50, 63, 64, 300 (the last is past the 64-instance lanes).
// kind 0: 0/1 utilities; 1: integer differences up to ±100; 2: up to ±127; 3: fractional scores.
// Every third comparison has identical arms in stratum 1 (a part that adds exactly 0).
PairedComparison make(std::uint32_t c, int kind) {
  const std::vector<std::uint32_t> sizes = {12, 50, 63, 64, 300};
  Stream stream{1000 + c};
  PairedComparison comparison;
  comparison.name = "c" + std::to_string(c);
  for (std::uint32_t t = 0; t < sizes.size(); ++t) {
    if (kind != 3 && c % 5 == 4 && t == 2) continue;  // some comparisons skip a stratum
    PairedStratum s;
    s.id = t;
    for (std::uint32_t i = 0; i < sizes[t]; ++i) {
      double a = 0;
      double b = 0;
      if (kind == 0) {
        a = stream.next() < 0.6 ? 1 : 0;
        b = stream.next() < 0.5 ? 1 : 0;
      } else if (kind == 1 || kind == 2) {
        const double scale = kind == 1 ? 100 : 127;
        a = std::floor(stream.next() * (scale + 1));
        b = std::floor(stream.next() * (scale + 1));
        if (stream.next() < 0.5) std::swap(a, b);
        a = std::min(a, 127.0);
        b = std::min(b, 127.0);
        if (kind == 2 && i == 0) {
          a = 127;
          b = 0;
        }
      } else {
        a = stream.next();
        b = stream.next();
      }
      s.arm_a.push_back(a);
      s.arm_b.push_back(c % 3 == 0 && t == 1 ? a : b);
    }
    comparison.strata.push_back(std::move(s));
  }
  return comparison;
}

void expect_definition(const std::vector<PairedComparison>& batch, Aggregate aggregate) {
  BootstrapOptions options;
  options.resamples = 64;
  options.seed = 0x1234567890abcdefull;
  options.aggregate = aggregate;
  options.keep_replicates = true;
  options.keep_sorted_replicates = true;
  for (int threads : {1, 3}) {
    options.threads = threads;
    const auto results = paired_bootstrap_batch(batch, options);
    ASSERT_EQ(results.size(), batch.size());
    for (std::size_t c = 0; c < batch.size(); ++c) {
      ASSERT_EQ(results[c].replicates.size(), 64u);
      for (std::uint32_t b = 0; b < 64; ++b) {
        const double expected = reference_replicate(batch[c], aggregate, options.seed, b);
        ASSERT_EQ(bits(results[c].replicates[b]), bits(expected))
            << batch[c].name << " (" << aggregate_name(aggregate) << "), b = " << b << ": "
            << results[c].replicates[b] << " vs " << expected;
      }
      std::vector<double> sorted = results[c].replicates;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(results[c].sorted_replicates, sorted) << batch[c].name;
    }
  }
}

// 0/1 data: 8-bit lanes; ±100 over 300 instances: 16-bit; ±127 over 300: 32-bit; fractional:
// double lanes. 70 integer and 40 double comparisons share the strata, so the rows span several
// vectors and the 8-vector blocks.
TEST(BootstrapKernel, LaneKernelEqualsTheDefinitionPooledAndMacro) {
  std::vector<PairedComparison> batch;
  for (std::uint32_t c = 0; c < 40; ++c) batch.push_back(make(c, 0));
  for (std::uint32_t c = 40; c < 60; ++c) batch.push_back(make(c, 1));
  for (std::uint32_t c = 60; c < 70; ++c) batch.push_back(make(c, 2));
  for (std::uint32_t c = 70; c < 110; ++c) batch.push_back(make(c, 3));
  expect_definition(batch, Aggregate::pooled);
  expect_definition(batch, Aggregate::macro);
}

TEST(BootstrapKernel, EachLaneWidthAlone) {
  for (int kind : {0, 1, 2, 3}) {
    SCOPED_TRACE(kind);
    expect_definition({make(7, kind)}, Aggregate::pooled);
    expect_definition({make(8, kind), make(9, kind)}, Aggregate::macro);
  }
}

// 50,000 instances in one stratum: padding one or two lanes to a 32-byte row would waste more
// than 1 MiB, so the plan keeps unpadded rows (the scalar "narrow" loop).
TEST(BootstrapKernel, LargeStratumWithFewLanesEqualsTheDefinition) {
  std::vector<PairedComparison> batch;
  for (std::uint32_t c = 0; c < 4; ++c) {
    Stream stream{500 + c};
    PairedComparison comparison;
    comparison.name = "large" + std::to_string(c);
    PairedStratum s;
    s.id = 9;
    for (std::uint32_t i = 0; i < 50000; ++i) {
      const double a = stream.next();
      const double b = stream.next();
      s.arm_a.push_back(c % 2 == 0 ? (a < 0.6 ? 1.0 : 0.0) : a);
      s.arm_b.push_back(c % 2 == 0 ? (b < 0.5 ? 1.0 : 0.0) : b);
    }
    comparison.strata.push_back(std::move(s));
    batch.push_back(std::move(comparison));
  }
  BootstrapOptions options;
  options.resamples = 3;
  options.seed = 99;
  options.keep_replicates = true;
  for (const auto& group :
       {std::vector<PairedComparison>{batch[0]}, std::vector<PairedComparison>{batch[1]}, batch}) {
    const auto results = paired_bootstrap_batch(group, options);
    for (std::size_t c = 0; c < group.size(); ++c) {
      for (std::uint32_t b = 0; b < 3; ++b) {
        EXPECT_EQ(bits(results[c].replicates[b]),
                  bits(reference_replicate(group[c], Aggregate::pooled, 99, b)))
            << group[c].name << ", b = " << b;
      }
    }
  }
}

TEST(BootstrapKernel, AllZeroComparisonHasZeroReplicates) {
  PairedComparison same = make(3, 3);
  for (PairedStratum& s : same.strata) s.arm_b = s.arm_a;
  BootstrapOptions options;
  options.resamples = 100;
  options.keep_replicates = true;
  const auto result = paired_bootstrap(same, options);
  for (double v : result.replicates) EXPECT_EQ(bits(v), bits(0.0));
  EXPECT_EQ(result.at_or_below_zero, 100);
}

TEST(BootstrapKernel, SortReplicatesEqualsStdSort) {
  Stream stream{77};
  std::vector<std::vector<double>> cases;
  std::vector<double> few, many, with_inf, tiny;
  for (int i = 0; i < 50000; ++i) few.push_back(std::floor(stream.next() * 201 - 100) / 96);
  for (int i = 0; i < 50000; ++i) many.push_back(stream.next() * 2 - 1);
  for (int i = 0; i < 5000; ++i) with_inf.push_back(stream.next() - 0.5);
  with_inf[10] = std::numeric_limits<double>::infinity();
  with_inf[20] = -std::numeric_limits<double>::infinity();
  with_inf[30] = 0.0;
  for (int i = 0; i < 10; ++i) tiny.push_back(stream.next());
  std::vector<double> boundary = few;
  boundary.resize(4096);
  for (int i = 0; i < 2049; ++i) boundary[static_cast<std::size_t>(i)] = i * 0.5;  // 2049 distinct
  cases = {few, many, with_inf, tiny, boundary, {}};
  for (const auto& values : cases) {
    std::vector<double> mine = values;
    std::vector<double> reference = values;
    sort_replicates(mine);
    std::sort(reference.begin(), reference.end());
    ASSERT_EQ(mine.size(), reference.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      ASSERT_EQ(bits(mine[i]), bits(reference[i])) << "size " << values.size() << ", i " << i;
    }
  }
  // A −0 among the values: std::sort's own arrangement (no bitwise claim beyond equality).
  std::vector<double> signed_zero = {0.5, -0.0, 0.0, -0.25, 0.0};
  sort_replicates(signed_zero);
  EXPECT_TRUE(std::is_sorted(signed_zero.begin(), signed_zero.end()));
}

}  // namespace
}  // namespace kvaudit::stats
