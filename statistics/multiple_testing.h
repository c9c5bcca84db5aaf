// Family-wise error control over the candidates of a certification (issue 17; Learn then Test,
// Angelopoulos, Bates, Candès, Jordan & Lei 2021, arXiv:2110.01052, §4 "FWER-controlling
// algorithms"; docs/design/statistics.md §Bounded-loss risks, procedures and planning).
//
// p_1..p_J are valid p-values of the nulls H0_j "candidate j is unsafe", listed in the
// preregistered order (conservative → aggressive). Each procedure rejects (= certifies) a set of
// candidates with P(any true null rejected) ≤ δ for any dependence between the p_j:
//   fixed_sequence            test j = 1, 2, … at level δ, stop at the first p_j > δ (today's
//                             rule; certification.h). One gateway null, no union bound.
//   fixed_sequence_multistart S start points s_k = k·⌊J/S⌋, k = 0..S−1 (0-based; the list split
//                             into S equal branches, the last one taking the remainder — the
//                             positions of MAPIE 1.6's FWERFixedSequenceTesting(n_starts = S)).
//                             From each start a fixed sequence walks toward the aggressive end at
//                             level δ/S until its first failure (it may walk into the next
//                             branch); the rejections are the union. FWER ≤ Σ_k δ/S = δ (a
//                             Bonferroni split of δ over S fixed sequences). S = 1 is
//                             fixed_sequence; S = J is Bonferroni's rejections at level δ/J.
//   bonferroni                every p_j ≤ δ/J.
//   holm                      step-down (Holm 1979): sort p ascending (ties by list order), reject
//                             p_(i) while p_(i) ≤ δ/(J − i + 1), i = 1, 2, …; stop at the first
//                             failure. Rejects a superset of Bonferroni's.
// Comparisons are inclusive (p ≤ level), as in certification.h. Holm and Bonferroni do not use
// the order; the two fixed-sequence rules lose power when the list is not monotone (an unsafe
// candidate early blocks every later one on its walk) — multistart limits that loss.
// These are the procedures of MAPIE 1.6 mapie/risk_control/fwer_control.py (control_fwer with
// "fixed_sequence", "bonferroni", "bonferroni_holm", FWERFixedSequenceTesting(n_starts)), whose
// rejections tests/statistics/multiple_testing_test.cpp reproduces from the golden file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kvaudit::stats {

enum class TestingProcedure { fixed_sequence, fixed_sequence_multistart, bonferroni, holm };

// "fixed_sequence", "fixed_sequence_multistart", "bonferroni" or "holm"; anything else throws
// kvaudit::InputError naming `where` and the accepted names.
TestingProcedure parse_testing_procedure(const std::string& text, const std::string& where);
std::string to_string(TestingProcedure procedure);

struct ProcedureResult {
  std::vector<bool> rejected;  // H0_j rejected = candidate j certified (same order as p_values)
  std::vector<bool> tested;    // reached by the procedure (compared with its level)
  // The level each p-value was compared with; for an untested one, the level it would have met
  // had the procedure reached it (fixed sequence: δ; multistart: δ/S; Holm: δ/(J − rank + 1) at its
  // rank in the sorted order; Bonferroni tests every one at δ/J).
  std::vector<double> level;
  // Multistart only: the 0-based start positions (empty for the other procedures).
  std::vector<std::size_t> starts;
};

// Applies `procedure` to p_values (in the preregistered order). Requires a non-empty list of
// p-values in [0, 1], delta in (0, 1), and for multistart 1 ≤ starts ≤ J (`starts` is ignored by
// the other procedures). Throws kvaudit::InputError naming the argument.
ProcedureResult apply_procedure(TestingProcedure procedure, const std::vector<double>& p_values,
                                double delta, std::size_t starts = 1);

// The 0-based start positions k·⌊J/S⌋, k = 0..S−1, of fixed_sequence_multistart.
std::vector<std::size_t> multistart_positions(std::size_t candidates, std::size_t starts);

}  // namespace kvaudit::stats
