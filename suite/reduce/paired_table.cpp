// Shared columns and attributes of the paired-comparison tables (see paired_table.h).
#include "suite/reduce/paired_table.h"

#include "suite/common/sha256.h"

namespace kvaudit::reduce {

void add_paired_columns(Table& t, const std::string& arm_a, const std::string& arm_b) {
  t.add_column("n", ColumnType::integer, 0, true, "n");
  t.add_column("strata", ColumnType::integer, 0, false);
  t.add_column(arm_a, ColumnType::real, 3);
  t.add_column(arm_b, ColumnType::real, 3);
  t.add_column("delta", ColumnType::real, 3, true, "Δ");
  t.add_column("ci_lower", ColumnType::real, 3, true, "CI low");
  t.add_column("ci_upper", ColumnType::real, 3, true, "CI high");
  t.add_column("family_lower", ColumnType::real, 3, true, "fam. low");
  t.add_column("family_upper", ColumnType::real, 3, true, "fam. high");
  t.add_column("p_one_sided", ColumnType::pvalue, 4, true, "p");
  t.add_column("p_two_sided_bootstrap", ColumnType::pvalue, 4, false);
  t.add_column("test", ColumnType::text, 0, false);
  t.add_column("significant", ColumnType::flag, 0, true, "sig.");
  t.add_column("pairs_expected", ColumnType::integer, 0, false);
  t.add_column("pairs_used", ColumnType::integer, 0, false);
  t.add_column("pairs_excluded", ColumnType::integer, 0, false);
  t.add_column("pairs_unusable", ColumnType::integer, 0, false);
  t.add_column("replicate_hash", ColumnType::text, 0, false);
  t.partial_column = static_cast<int>(t.add_column("partial", ColumnType::flag, 0, false));
}

void append_paired_values(std::vector<Value>& row, const PairedRowResult& r,
                          const PairAccumulator::Row& pairs) {
  if (r.empty) {
    row.insert(row.end(),
               {std::int64_t{0}, std::int64_t{0}, Value{}, Value{}, Value{}, Value{}, Value{},
                Value{}, Value{}, Value{}, Value{}, std::string("none"), false});
  } else {
    row.insert(row.end(),
               {r.instances, r.strata, r.mean_a, r.mean_b, r.estimate, r.ci_lower, r.ci_upper,
                r.family_lower, r.family_upper, r.p_test, r.p_two_sided, r.test, r.significant});
  }
  row.insert(row.end(),
             {pairs.expected_pairs, pairs.used_pairs, pairs.excluded_pairs, pairs.unusable_pairs,
              r.empty ? std::string() : id_hex(r.replicate_hash), pairs.partial()});
}

void add_paired_attributes(Table& t, const BootstrapSettings& s, const ResolvedFamily& family) {
  add_family_attributes(t, family);
  t.add_attribute("bootstrap_resamples", std::to_string(s.resamples));
  t.add_attribute("bootstrap_seed", std::to_string(s.seed));
  t.add_attribute("rng", "philox4x32-10 keyed by (seed, stratum, replicate)");
  t.add_attribute("resampling_unit", "benchmark instance (benchmark, task, instance index)");
  t.add_attribute("strata", "task");
  t.add_attribute("estimate", "instance-weighted mean of d = a - b");
  t.add_attribute("interval", "percentile, marginal level " + format_exact(1 - s.alpha) +
                                  ", family level 1 - alpha/m");
  t.add_attribute("quantile_rule", "Hyndman-Fan type 7 (numpy 'linear')");
  t.add_attribute("p_value",
                  "one-sided H1: delta > 0; bootstrap (1 + #{delta* <= 0}) / (B + 1), or exact "
                  "McNemar (P{Bin(N, 1/2) >= n10}) for 0/1 rows with n < " +
                      std::to_string(kMcNemarBelow));
  t.add_attribute("significant", "p <= alpha/m");
}

}  // namespace kvaudit::reduce
