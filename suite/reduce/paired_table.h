// The columns every paired-comparison table shares (n, arm means, Δ, its marginal and family
// intervals, the test and its p, significance, partial) and the attributes that say how they were
// computed (B, seed, quantile rule, p definition, family).
#pragma once

#include <string>
#include <vector>

#include "suite/reduce/families.h"
#include "suite/reduce/pair_accumulator.h"
#include "suite/reduce/paired_rows.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

// Adds the shared columns after the table's key columns; `arm_a`/`arm_b` name the arms' mean
// columns (e.g. "u_aware", "u_agnostic"). Sets table.partial_column.
void add_paired_columns(Table& table, const std::string& arm_a, const std::string& arm_b);

// Appends the shared values of one row (in add_paired_columns order).
void append_paired_values(std::vector<Value>& row, const PairedRowResult& result,
                          const PairAccumulator::Row& pairs);

// Adds B, seed, quantile rule, interval and p definitions and the family to the attributes.
void add_paired_attributes(Table& table, const BootstrapSettings& settings,
                           const ResolvedFamily& family);

}  // namespace kvaudit::reduce
