// Risk certification by Learn-then-Test with fixed-sequence testing (docs/design/statistics.md
// §Certification).
//
// Contract (τ, ε, δ); candidates λ_1..λ_J ordered conservative → aggressive *before* the
// calibration data is seen; full KV (λ_0) is the fallback.
//   V_ij = 1{U_full(X_i) − U_λj(X_i) > τ},  K_j = Σ_i V_ij over the n calibration requests,
//   p_j  = P{Bin(n, ε) ≤ K_j} if K_j ≤ ⌊nε⌋ − 1 else 1   (binomial.h),
//   for j = 1, 2, …: certify while p_j ≤ δ; stop at the first p_j > δ; select the last certified
//   candidate, or full KV when j = 1 already fails.
// Fixed-sequence testing controls the family-wise error at δ without multiplicity correction, for
// any dependence between the p_j (docs/design/statistics.md §Why no multiplicity correction):
// P(R(λ̂) ≤ ε) ≥ 1 − δ over the calibration draw.
//
// Plug-in rule, shown beside the certified choice for contrast (it has no guarantee): the most
// aggressive candidate, in the preregistered order, whose empirical calibration risk K_j/n ≤ ε
// (compared as K_j ≤ ⌊nε⌋ in integers); full KV when none qualifies. It looks at every candidate,
// not only up to the first failure.
//
// Test-split evaluation (of the selected policy and of the plug-in choice): the empirical
// violation rate on the test requests and, per task, the test risk with a two-sided Clopper–Pearson
// interval Bonferroni-corrected over the tasks (m = number of tasks), flagging tasks whose lower
// bound exceeds ε. This describes the test split only; the guarantee is about the population rate
// (docs/design/statistics.md §Pitfalls, item 6). Full KV never violates (τ ≥ 0), so its test risk
// is 0 by definition.
//
// Contract kinds (issue 17; docs/MANIFEST.md §[[certification]]), used when ContractKind is not
// the default above (the default takes exactly the path above, so its results are unchanged):
//   risks     violation (V_ij, level ε) and/or mean loss, L_ij = clip(U_full − U_λj, 0, 1) at
//             level ε_L, H0: E[L] > ε_L, with the Hoeffding–Bentkus p-value of r̂ = mean L or the
//             Waudby-Smith–Ramdas betting p-value (bets tuned at δ) (statistics/bounded_loss.h;
//             Angelopoulos et al. 2021, Learn then Test, arXiv:2110.01052 §3; Bates et al. 2021,
//             RCPS). Several risks: p_j = max over the risks (LTT §4: the null "some risk is above
//             its level" is the union of the per-risk nulls).
//   per_task  p_j = max over the tasks t of p_{j,t}, each computed from task t's calibration
//             requests alone. Intersection–union test (Berger 1982): H0_j = ∪_t {R_t(λ_j) > ε};
//             under H0_j some t* has R_t* > ε and P(max_t p_{j,t} ≤ u) ≤ P(p_{j,t*} ≤ u) ≤ u, so
//             it is a valid p-value with no factor over the tasks. A Bonferroni split over the T
//             tasks (every p_{j,t} ≤ δ/T) rejects a subset of what max_t p_{j,t} ≤ δ rejects.
//   procedure fixed sequence, fixed sequence with S start points, Bonferroni or Holm over the
//             candidates' p_j at δ (statistics/multiple_testing.h); FWER ≤ δ for each.
//   selection the most aggressive certified candidate (the highest index rejected; for fixed
//             sequence that is the last before the first failure); full KV when none.
//   plug-in   the most aggressive candidate whose every empirical risk (per task when per_task)
//             is ≤ its level.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "statistics/clopper_pearson.h"
#include "statistics/multiple_testing.h"

namespace kvaudit::stats {

struct Contract {
  double tau = 0;      // utility tolerance, ≥ 0
  double epsilon = 0;  // maximum population violation rate, in (0, 1)
  double delta = 0;    // error budget, in (0, 1)
};

enum class LossBound { hoeffding_bentkus, wsr };

// The contract's kind; the default is the original contract (one violation risk, fixed sequence,
// aggregate over the tasks).
struct ContractKind {
  bool violation = true;   // certify the violation rate at Contract::epsilon
  bool mean_loss = false;  // certify the mean loss clip(U_full − U, 0, 1) at loss_epsilon
  LossBound bound = LossBound::hoeffding_bentkus;
  double loss_epsilon = 0;  // in (0, 1) when mean_loss
  TestingProcedure procedure = TestingProcedure::fixed_sequence;
  std::size_t starts = 1;  // fixed_sequence_multistart: start points, 1 ≤ starts ≤ J
  bool per_task = false;   // every task's risk ≤ its level (max over the tasks' p-values)
  bool is_default() const {
    return violation && !mean_loss && procedure == TestingProcedure::fixed_sequence && !per_task;
  }
};

// L_i = clip(u_full[i] − u_candidate[i], 0, 1). Requires equal lengths and finite values.
std::vector<double> losses_from_utilities(const std::vector<double>& u_full,
                                          const std::vector<double>& u_candidate,
                                          const std::string& what);

// V_i = 1{u_full[i] − u_candidate[i] > tau}. Requires equal lengths, finite values, tau ≥ 0.
// `what` names the source in error messages (e.g. "results/x: snapkv@0.5 calibration").
std::vector<std::uint8_t> violations_from_utilities(const std::vector<double>& u_full,
                                                    const std::vector<double>& u_candidate,
                                                    double tau, const std::string& what);

// One candidate, in the preregistered order. Indicators are 0 or 1; calibration requests are
// aligned across candidates (request i is the same X_i for every candidate), and likewise the test
// requests.
struct CertificationCandidate {
  std::string id;                                    // e.g. "snapkv@0.25" (what tables print)
  std::vector<std::uint8_t> calibration_violations;  // length n
  std::vector<std::uint8_t> test_violations;         // length n_test (may be empty: no test split)
  // Losses clip(U_full − U, 0, 1) (ContractKind::mean_loss only; else may be empty).
  std::vector<double> calibration_losses{};  // length n
  std::vector<double> test_losses{};         // length n_test
};

struct CertificationInput {
  std::string name;  // the certification block's name (error messages, tables)
  Contract contract;
  std::vector<CertificationCandidate> candidates;  // conservative → aggressive, J ≥ 1
  // Task of every test request (length n_test, the same for every candidate). Empty when there is
  // no test split.
  std::vector<std::string> test_tasks;
  // The Bonferroni family of the per-task test-risk intervals: m is set to the number of distinct
  // test tasks; `task_family_name` names it (the prereg's certification_task_risk family).
  std::string task_family_name = "certification_task_risk";
  double task_alpha = 0.05;  // family-wise error rate of the per-task intervals
  ContractKind kind{};       // default: the original contract
  // Task of every calibration request (length n); needed when kind.per_task.
  std::vector<std::string> calibration_tasks{};
};

struct CandidateOutcome {
  std::string id;
  std::int64_t violations = 0;  // K_j
  double empirical_risk = 0;    // K_j / n
  double p_value = 1;           // p_j (computed for every candidate, tested or not)
  bool tested = false;          // reached by the fixed sequence
  bool certified = false;       // tested and p_j ≤ δ
  // Contract kinds other than the default (NaN / "" otherwise): the per-risk p-values (each the
  // max over the tasks when per_task), the calibration mean loss, the task whose p-value is the
  // largest (per_task) and the level the procedure compared p_j with.
  double p_violation = std::numeric_limits<double>::quiet_NaN();
  double p_mean_loss = std::numeric_limits<double>::quiet_NaN();
  double mean_loss = std::numeric_limits<double>::quiet_NaN();
  std::string worst_task{};
  double level = std::numeric_limits<double>::quiet_NaN();
};

struct TaskRisk {
  std::string task;
  std::int64_t violations = 0;
  std::int64_t requests = 0;
  ProportionInterval interval;  // Bonferroni over the tasks (interval.m = number of tasks)
  bool lower_bound_exceeds_epsilon = false;
  double mean_loss = std::numeric_limits<double>::quiet_NaN();  // kind.mean_loss: test mean loss
};

struct TestEvaluation {
  std::string policy;         // candidate id, or "full-kv"
  bool full_kv = false;       // the fallback (risk 0 by definition; per_task still listed)
  std::int64_t requests = 0;  // n_test
  std::int64_t violations = 0;
  double empirical_risk = 0;       // violations / n_test (0 when n_test = 0)
  std::vector<TaskRisk> per_task;  // sorted by task name
  std::int64_t tasks_flagged = 0;  // tasks whose lower bound exceeds ε
  double mean_loss = std::numeric_limits<double>::quiet_NaN();  // kind.mean_loss: test mean loss
};

inline constexpr const char* kFullKvPolicy = "full-kv";

struct CertificationResult {
  std::string name;
  Contract contract;
  ContractKind kind{};
  std::int64_t n = 0;                        // calibration requests
  std::int64_t violation_cap = 0;            // ⌊nε⌋ (floor(n·ε + 1e-9))
  std::int64_t k_star = -1;                  // K*(n, ε, δ), −1 when nothing can certify
  std::vector<CandidateOutcome> candidates;  // preregistered order
  // Index of the first candidate with p_j > δ (where the sequence stopped); candidates.size() when
  // every candidate certified.
  std::size_t stop_index = 0;
  std::optional<std::size_t> selected;  // last certified candidate; nullopt = full-KV fallback
  std::string selected_policy;          // its id or "full-kv"
  std::optional<std::size_t> plug_in;   // plug-in rule's choice; nullopt = full KV
  std::string plug_in_policy;           // its id or "full-kv"
  std::optional<TestEvaluation> selected_test;  // present when there is a test split
  std::optional<TestEvaluation> plug_in_test;
};

// Runs the procedure. Throws kvaudit::InputError (message starts with input.name) for: no
// candidates, an invalid contract, n = 0, calibration vectors of different lengths, indicators
// other than 0/1, test vectors whose length differs from test_tasks, task_alpha outside (0, 1);
// for another kind also: loss vectors of the wrong length or outside [0, 1], calibration_tasks of
// the wrong length (per_task), loss_epsilon outside (0, 1), starts outside [1, J], no risk.
CertificationResult certify(const CertificationInput& input);

// One candidate given by its calibration count K_j alone (the procedure only looks at K_j).
struct CalibrationCount {
  std::string id;               // e.g. "candidate 1"
  std::int64_t violations = 0;  // K_j, in [0, n]
};

// The same procedure as certify() from the counts K_j over n calibration requests, without a test
// split (selected_test and plug_in_test stay empty): O(J) memory and O(J + log n) binomial tails
// for any n ≤ kMaxTrials (binomial.h), where certify() needs n-long indicator vectors. Throws
// kvaudit::InputError (message starts with `name`) for: no candidates, an invalid contract, n
// outside [1, kMaxTrials], a K_j outside [0, n].
CertificationResult certify_counts(const std::string& name, const Contract& contract,
                                   std::int64_t n, const std::vector<CalibrationCount>& candidates);

// Refuses to certify under a contract or candidate order that differs from the preregistration
// lock: throws kvaudit::InputError naming `where`, the field and both values when τ, ε or δ
// differ (exact comparison: both come from the same canonical JSON) or the candidate lists differ.
void require_matches_lock(const Contract& used, const Contract& locked,
                          const std::vector<std::string>& used_candidates,
                          const std::vector<std::string>& locked_candidates,
                          const std::string& where);

}  // namespace kvaudit::stats
