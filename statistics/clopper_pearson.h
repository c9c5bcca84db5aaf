// Exact (Clopper–Pearson) binomial confidence bounds and Bonferroni families.
//
// Two-sided interval at level 1 − a for x successes in n trials (Clopper & Pearson 1934):
//   lower = B⁻¹(a/2; x, n − x + 1)   (0 when x = 0)
//   upper = B⁻¹(1 − a/2; x + 1, n − x)   (1 when x = n)
// with B⁻¹ the beta quantile (Boost.Math ibeta_inv). One-sided bounds use a in place of a/2.
// Bonferroni: an interval that belongs to a declared family of m comparisons with family-wise
// error rate α is computed at a = α/m. Every interval result carries the family's name and m so
// that every table can print them (docs/REPORT.md "Conventions shared by the analyses").
#pragma once

#include <cstdint>
#include <string>

namespace kvaudit::stats {

// A declared Bonferroni family: its name (as in the manifest / prereg lock) and its size m ≥ 1.
struct Family {
  std::string name;
  int m = 1;
};

struct ProportionInterval {
  std::int64_t successes = 0;
  std::int64_t trials = 0;
  double estimate = 0;  // successes / trials
  double lower = 0;     // two-sided Clopper–Pearson bounds at level 1 − alpha/m
  double upper = 1;
  double family_alpha = 0;        // α, the family-wise error rate requested
  double per_interval_alpha = 0;  // α / m, the level each interval is computed at
  std::string family;             // Family::name
  int m = 1;                      // Family::m
};

// Two-sided exact interval for x successes out of n at family-wise level alpha, Bonferroni over
// `family` (level 1 − alpha/m). Requires n ≥ 1, 0 ≤ x ≤ n, alpha in (0, 1), family.m ≥ 1; throws
// kvaudit::InputError otherwise.
ProportionInterval clopper_pearson_interval(std::int64_t successes, std::int64_t trials,
                                            double alpha, const Family& family);

// One-sided exact bounds at confidence 1 − alpha (no family): the upper bound is 1 for x = n, the
// lower bound 0 for x = 0.
double clopper_pearson_upper_bound(std::int64_t successes, std::int64_t trials, double alpha);
double clopper_pearson_lower_bound(std::int64_t successes, std::int64_t trials, double alpha);

}  // namespace kvaudit::stats
