// Fixed sequence (one or several starts), Bonferroni and Holm over the candidates' p-values. See
// multiple_testing.h for the rules and why each controls the family-wise error.
#include "statistics/multiple_testing.h"

#include <algorithm>
#include <numeric>

#include "base/errors.h"
#include "statistics/argument_checks.h"

namespace kvaudit::stats {
namespace {

constexpr const char* kNames = "fixed_sequence, fixed_sequence_multistart, bonferroni or holm";

}  // namespace

TestingProcedure parse_testing_procedure(const std::string& text, const std::string& where) {
  if (text == "fixed_sequence") return TestingProcedure::fixed_sequence;
  if (text == "fixed_sequence_multistart") return TestingProcedure::fixed_sequence_multistart;
  if (text == "bonferroni") return TestingProcedure::bonferroni;
  if (text == "holm") return TestingProcedure::holm;
  throw InputError(where + ": unknown testing procedure '" + text + "' (expected " + kNames + ")");
}

std::string to_string(TestingProcedure procedure) {
  switch (procedure) {
    case TestingProcedure::fixed_sequence:
      return "fixed_sequence";
    case TestingProcedure::fixed_sequence_multistart:
      return "fixed_sequence_multistart";
    case TestingProcedure::bonferroni:
      return "bonferroni";
    case TestingProcedure::holm:
      return "holm";
  }
  return "unknown";
}

std::vector<std::size_t> multistart_positions(std::size_t candidates, std::size_t starts) {
  if (candidates == 0) throw InputError("multistart_positions: no candidates");
  if (starts < 1 || starts > candidates) {
    throw InputError("multistart_positions: starts must be in [1, J = " +
                     std::to_string(candidates) + "], got " + std::to_string(starts));
  }
  const std::size_t branch = candidates / starts;
  std::vector<std::size_t> positions(starts);
  for (std::size_t k = 0; k < starts; ++k) positions[k] = k * branch;
  return positions;
}

ProcedureResult apply_procedure(TestingProcedure procedure, const std::vector<double>& p_values,
                                double delta, std::size_t starts) {
  const std::size_t count = p_values.size();
  if (count == 0) throw InputError("apply_procedure: no p-values (no candidates)");
  if (!(delta > 0.0 && delta < 1.0)) {
    throw InputError("apply_procedure: delta must be in (0, 1), got " + exact_text(delta));
  }
  for (std::size_t j = 0; j < count; ++j) {
    if (!(p_values[j] >= 0.0 && p_values[j] <= 1.0)) {
      throw InputError("apply_procedure: p-value of candidate " + std::to_string(j) + " is " +
                       exact_text(p_values[j]) + " (must be in [0, 1])");
    }
  }
  ProcedureResult result;
  result.rejected.assign(count, false);
  result.tested.assign(count, false);
  result.level.assign(count, delta);
  const auto j_count = static_cast<double>(count);

  switch (procedure) {
    case TestingProcedure::fixed_sequence:
      for (std::size_t j = 0; j < count; ++j) {
        result.tested[j] = true;
        if (p_values[j] > delta) break;
        result.rejected[j] = true;
      }
      break;
    case TestingProcedure::fixed_sequence_multistart: {
      if (starts < 1 || starts > count) {
        throw InputError("apply_procedure: fixed_sequence_multistart needs starts in [1, J = " +
                         std::to_string(count) + "], got " + std::to_string(starts));
      }
      const double level = delta / static_cast<double>(starts);
      result.level.assign(count, level);
      result.starts = multistart_positions(count, starts);
      for (const std::size_t start : result.starts) {
        for (std::size_t j = start; j < count; ++j) {
          result.tested[j] = true;
          if (p_values[j] > level) break;
          result.rejected[j] = true;
        }
      }
      break;
    }
    case TestingProcedure::bonferroni: {
      const double level = delta / j_count;
      result.level.assign(count, level);
      for (std::size_t j = 0; j < count; ++j) {
        result.tested[j] = true;
        result.rejected[j] = p_values[j] <= level;
      }
      break;
    }
    case TestingProcedure::holm: {
      std::vector<std::size_t> order(count);
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return p_values[a] < p_values[b]; });
      for (std::size_t rank = 0; rank < count; ++rank) {
        result.level[order[rank]] = delta / static_cast<double>(count - rank);
      }
      for (std::size_t rank = 0; rank < count; ++rank) {
        const std::size_t j = order[rank];
        result.tested[j] = true;
        if (p_values[j] > result.level[j]) break;
        result.rejected[j] = true;
      }
      break;
    }
  }
  return result;
}

}  // namespace kvaudit::stats
