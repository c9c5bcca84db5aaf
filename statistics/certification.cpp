// Learn-then-Test certification with fixed-sequence testing, the plug-in contrast and the
// test-split evaluation with per-task Bonferroni Clopper–Pearson intervals. See certification.h.
#include "statistics/certification.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/errors.h"
#include "statistics/argument_checks.h"
#include "statistics/binomial.h"
#include "statistics/bounded_loss.h"

namespace kvaudit::stats {
namespace {

void validate_contract(const Contract& c, const std::string& where) {
  if (!(c.tau >= 0.0) || !std::isfinite(c.tau)) {
    throw InputError(where + ": contract tau must be finite and >= 0, got " + exact_text(c.tau));
  }
  if (!(c.epsilon > 0.0 && c.epsilon < 1.0)) {
    throw InputError(where + ": contract epsilon must be in (0, 1), got " + exact_text(c.epsilon));
  }
  if (!(c.delta > 0.0 && c.delta < 1.0)) {
    throw InputError(where + ": contract delta must be in (0, 1), got " + exact_text(c.delta));
  }
}

std::int64_t count_violations(const std::vector<std::uint8_t>& v, const std::string& where) {
  std::int64_t k = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] > 1) {
      throw InputError(where + ": violation indicator " + std::to_string(i) + " is " +
                       std::to_string(static_cast<int>(v[i])) + " (must be 0 or 1)");
    }
    k += v[i];
  }
  return k;
}

TestEvaluation evaluate(const CertificationInput& input, std::optional<std::size_t> policy,
                        const std::vector<std::string>& task_names) {
  TestEvaluation eval;
  eval.full_kv = !policy.has_value();
  eval.policy = policy ? input.candidates[*policy].id : kFullKvPolicy;
  eval.requests = static_cast<std::int64_t>(input.test_tasks.size());
  const Family family{input.task_family_name, static_cast<int>(task_names.size())};
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> per_task;  // violations, requests
  for (const auto& task : task_names) per_task[task] = {0, 0};
  std::map<std::string, double> loss_sum;  // kind.mean_loss only
  double total_loss = 0;
  for (std::size_t i = 0; i < input.test_tasks.size(); ++i) {
    auto& [violations, requests] = per_task[input.test_tasks[i]];
    ++requests;
    // Full KV: V = 1{U_full − U_full > τ} = 0 for τ ≥ 0.
    const std::int64_t v = policy ? input.candidates[*policy].test_violations[i] : 0;
    violations += v;
    eval.violations += v;
    if (input.kind.mean_loss) {
      // Full KV: clip(U_full − U_full, 0, 1) = 0.
      const double l = policy ? input.candidates[*policy].test_losses[i] : 0.0;
      loss_sum[input.test_tasks[i]] += l;
      total_loss += l;
    }
  }
  if (input.kind.mean_loss && eval.requests > 0)
    eval.mean_loss = total_loss / static_cast<double>(eval.requests);
  eval.empirical_risk =
      eval.requests > 0 ? static_cast<double>(eval.violations) / static_cast<double>(eval.requests)
                        : 0.0;
  for (const auto& [task, counts] : per_task) {
    TaskRisk risk;
    risk.task = task;
    risk.violations = counts.first;
    risk.requests = counts.second;
    risk.interval = clopper_pearson_interval(counts.first, counts.second, input.task_alpha, family);
    risk.lower_bound_exceeds_epsilon = risk.interval.lower > input.contract.epsilon;
    if (input.kind.mean_loss && counts.second > 0)
      risk.mean_loss = loss_sum[task] / static_cast<double>(counts.second);
    if (risk.lower_bound_exceeds_epsilon) ++eval.tasks_flagged;
    eval.per_task.push_back(std::move(risk));
  }
  return eval;
}

// The decision part shared by certify() and certify_counts(): K*, every candidate's p_j, the fixed
// sequence and the plug-in choice, from the validated counts K_j over n requests.
CertificationResult decide(const std::string& name, const Contract& contract, std::int64_t n,
                           const std::vector<CalibrationCount>& counts) {
  CertificationResult result;
  result.name = name;
  result.contract = contract;
  result.n = n;
  result.violation_cap = violation_cap(n, contract.epsilon);
  result.k_star = max_certifiable_violations(n, contract.epsilon, contract.delta);

  for (const auto& count : counts) {
    CandidateOutcome outcome;
    outcome.id = count.id;
    outcome.violations = count.violations;
    outcome.empirical_risk = static_cast<double>(count.violations) / static_cast<double>(n);
    outcome.p_value = ltt_p_value(n, contract.epsilon, count.violations);
    result.candidates.push_back(std::move(outcome));
  }

  // Fixed sequence: certify while p_j ≤ δ, stop at the first failure.
  result.stop_index = result.candidates.size();
  for (std::size_t j = 0; j < result.candidates.size(); ++j) {
    auto& outcome = result.candidates[j];
    outcome.tested = true;
    if (outcome.p_value <= contract.delta) {
      outcome.certified = true;
      result.selected = j;
    } else {
      result.stop_index = j;
      break;
    }
  }
  result.selected_policy = result.selected ? result.candidates[*result.selected].id : kFullKvPolicy;

  // Plug-in: the most aggressive candidate with K_j/n ≤ ε, i.e. K_j ≤ ⌊nε⌋ (integers).
  for (std::size_t j = result.candidates.size(); j-- > 0;) {
    if (result.candidates[j].violations <= result.violation_cap) {
      result.plug_in = j;
      break;
    }
  }
  result.plug_in_policy = result.plug_in ? result.candidates[*result.plug_in].id : kFullKvPolicy;
  return result;
}

// The decision for a contract kind other than the default (see certification.h): per-risk
// p-values (per task: the max over the tasks), p_j = max over the risks, the procedure over the
// candidates, the most aggressive certified candidate, and the plug-in choice.
CertificationResult decide_kind(const CertificationInput& input,
                                const std::vector<std::int64_t>& counts) {
  const ContractKind& kind = input.kind;
  const Contract& contract = input.contract;
  const std::size_t n = input.candidates.front().calibration_violations.size();
  CertificationResult result;
  result.name = input.name;
  result.contract = contract;
  result.kind = kind;
  result.n = static_cast<std::int64_t>(n);
  result.violation_cap = violation_cap(result.n, contract.epsilon);
  result.k_star = max_certifiable_violations(result.n, contract.epsilon, contract.delta);

  // The groups the risks are computed over: every request, or each task's requests.
  std::vector<std::pair<std::string, std::vector<std::size_t>>> groups;
  if (kind.per_task) {
    std::map<std::string, std::vector<std::size_t>> by_task;
    for (std::size_t i = 0; i < n; ++i) by_task[input.calibration_tasks[i]].push_back(i);
    for (auto& [task, idx] : by_task) groups.emplace_back(task, std::move(idx));
  } else {
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    groups.emplace_back("", std::move(all));
  }

  std::vector<double> p_values;
  std::vector<bool> plug_in_ok;
  for (std::size_t j = 0; j < input.candidates.size(); ++j) {
    const auto& candidate = input.candidates[j];
    CandidateOutcome outcome;
    outcome.id = candidate.id;
    outcome.violations = counts[j];
    outcome.empirical_risk = static_cast<double>(counts[j]) / static_cast<double>(n);
    double p_max = -1, p_violation = -1, p_loss = -1;
    bool ok = true;
    for (const auto& [task, idx] : groups) {
      const auto n_g = static_cast<std::int64_t>(idx.size());
      double p_group = 0;
      if (kind.violation) {
        std::int64_t k = 0;
        for (std::size_t i : idx) k += candidate.calibration_violations[i];
        const double p = ltt_p_value(n_g, contract.epsilon, k);
        p_violation = std::max(p_violation, p);
        p_group = std::max(p_group, p);
        ok = ok && k <= violation_cap(n_g, contract.epsilon);
      }
      if (kind.mean_loss) {
        std::vector<double> losses;
        losses.reserve(idx.size());
        for (std::size_t i : idx) losses.push_back(candidate.calibration_losses[i]);
        const double r_hat = stats::mean_loss(
            losses, input.name + ": candidate '" + candidate.id + "' calibration losses");
        const double p = kind.bound == LossBound::wsr
                             ? wsr_p_value(losses, kind.loss_epsilon, contract.delta)
                             : hoeffding_bentkus_p_value(r_hat, n_g, kind.loss_epsilon);
        p_loss = std::max(p_loss, p);
        p_group = std::max(p_group, p);
        ok = ok && r_hat <= kind.loss_epsilon;
      }
      if (p_group > p_max) {
        p_max = p_group;
        outcome.worst_task = task;
      }
    }
    if (kind.mean_loss)
      outcome.mean_loss =
          stats::mean_loss(candidate.calibration_losses,
                           input.name + ": candidate '" + candidate.id + "' calibration losses");
    if (kind.violation) outcome.p_violation = p_violation;
    if (kind.mean_loss) outcome.p_mean_loss = p_loss;
    outcome.p_value = p_max;
    p_values.push_back(p_max);
    plug_in_ok.push_back(ok);
    result.candidates.push_back(std::move(outcome));
  }

  const ProcedureResult decision =
      apply_procedure(kind.procedure, p_values, contract.delta, kind.starts);
  result.stop_index = result.candidates.size();
  for (std::size_t j = 0; j < result.candidates.size(); ++j) {
    auto& outcome = result.candidates[j];
    outcome.tested = decision.tested[j];
    outcome.certified = decision.rejected[j];
    outcome.level = decision.level[j];
    if (outcome.certified) result.selected = j;  // the most aggressive certified one
    if (!outcome.certified && result.stop_index == result.candidates.size()) result.stop_index = j;
  }
  result.selected_policy = result.selected ? result.candidates[*result.selected].id : kFullKvPolicy;
  for (std::size_t j = result.candidates.size(); j-- > 0;) {
    if (plug_in_ok[j]) {
      result.plug_in = j;
      break;
    }
  }
  result.plug_in_policy = result.plug_in ? result.candidates[*result.plug_in].id : kFullKvPolicy;
  return result;
}

void validate_kind(const CertificationInput& input, std::size_t n) {
  const std::string& where = input.name;
  const ContractKind& kind = input.kind;
  if (!kind.violation && !kind.mean_loss) throw InputError(where + ": the contract has no risk");
  if (kind.mean_loss && !(kind.loss_epsilon > 0.0 && kind.loss_epsilon < 1.0))
    throw InputError(where + ": contract loss_epsilon must be in (0, 1), got " +
                     exact_text(kind.loss_epsilon));
  if (kind.procedure == TestingProcedure::fixed_sequence_multistart &&
      (kind.starts < 1 || kind.starts > input.candidates.size()))
    throw InputError(where + ": starts must be in [1, " + std::to_string(input.candidates.size()) +
                     "] (the candidates), got " + std::to_string(kind.starts));
  if (kind.per_task && input.calibration_tasks.size() != n)
    throw InputError(where + ": " + std::to_string(input.calibration_tasks.size()) +
                     " calibration tasks for " + std::to_string(n) + " calibration requests");
  if (!kind.mean_loss) return;
  for (const auto& candidate : input.candidates) {
    if (candidate.calibration_losses.size() != n ||
        candidate.test_losses.size() != input.test_tasks.size())
      throw InputError(where + ": candidate '" + candidate.id + "' has " +
                       std::to_string(candidate.calibration_losses.size()) + " calibration and " +
                       std::to_string(candidate.test_losses.size()) + " test losses for " +
                       std::to_string(n) + " and " + std::to_string(input.test_tasks.size()) +
                       " requests");
    if (!candidate.test_losses.empty())
      stats::mean_loss(candidate.test_losses,
                       where + ": candidate '" + candidate.id + "' test losses");
  }
}

}  // namespace

std::vector<double> losses_from_utilities(const std::vector<double>& u_full,
                                          const std::vector<double>& u_candidate,
                                          const std::string& what) {
  if (u_full.size() != u_candidate.size()) {
    throw InputError(what + ": " + std::to_string(u_full.size()) + " full-KV utilities but " +
                     std::to_string(u_candidate.size()) + " candidate utilities");
  }
  std::vector<double> out(u_full.size());
  for (std::size_t i = 0; i < u_full.size(); ++i) {
    if (!std::isfinite(u_full[i]) || !std::isfinite(u_candidate[i])) {
      throw InputError(what + ": utility of request " + std::to_string(i) + " is not finite");
    }
    out[i] = std::clamp(u_full[i] - u_candidate[i], 0.0, 1.0);
  }
  return out;
}

std::vector<std::uint8_t> violations_from_utilities(const std::vector<double>& u_full,
                                                    const std::vector<double>& u_candidate,
                                                    double tau, const std::string& what) {
  if (!(tau >= 0.0) || !std::isfinite(tau)) {
    throw InputError(what + ": tau must be finite and >= 0, got " + exact_text(tau));
  }
  if (u_full.size() != u_candidate.size()) {
    throw InputError(what + ": " + std::to_string(u_full.size()) + " full-KV utilities but " +
                     std::to_string(u_candidate.size()) + " candidate utilities");
  }
  std::vector<std::uint8_t> v(u_full.size());
  for (std::size_t i = 0; i < u_full.size(); ++i) {
    if (!std::isfinite(u_full[i]) || !std::isfinite(u_candidate[i])) {
      throw InputError(what + ": utility of request " + std::to_string(i) + " is not finite");
    }
    v[i] = (u_full[i] - u_candidate[i] > tau) ? 1 : 0;
  }
  return v;
}

CertificationResult certify(const CertificationInput& input) {
  const std::string& where = input.name;
  validate_contract(input.contract, where);
  if (input.candidates.empty()) throw InputError(where + ": no candidates to certify");
  if (!(input.task_alpha > 0.0 && input.task_alpha < 1.0)) {
    throw InputError(where + ": task_alpha must be in (0, 1), got " + exact_text(input.task_alpha));
  }
  const std::size_t n = input.candidates.front().calibration_violations.size();
  if (n == 0) throw InputError(where + ": no calibration requests (n = 0)");
  for (const auto& candidate : input.candidates) {
    if (candidate.calibration_violations.size() != n) {
      throw InputError(where + ": candidate '" + candidate.id + "' has " +
                       std::to_string(candidate.calibration_violations.size()) +
                       " calibration indicators, the first candidate has " + std::to_string(n));
    }
    if (candidate.test_violations.size() != input.test_tasks.size()) {
      throw InputError(where + ": candidate '" + candidate.id + "' has " +
                       std::to_string(candidate.test_violations.size()) +
                       " test indicators but there are " + std::to_string(input.test_tasks.size()) +
                       " test tasks");
    }
    count_violations(candidate.test_violations, where + ": candidate '" + candidate.id + "' test");
  }

  std::vector<CalibrationCount> counts;
  counts.reserve(input.candidates.size());
  for (const auto& candidate : input.candidates) {
    counts.push_back(
        {candidate.id, count_violations(candidate.calibration_violations,
                                        where + ": candidate '" + candidate.id + "' calibration")});
  }
  CertificationResult result;
  if (input.kind.is_default()) {
    result = decide(input.name, input.contract, static_cast<std::int64_t>(n), counts);
  } else {
    validate_kind(input, n);
    std::vector<std::int64_t> k;
    for (const auto& c : counts) k.push_back(c.violations);
    result = decide_kind(input, k);
  }

  if (!input.test_tasks.empty()) {
    std::map<std::string, int> distinct;
    for (const auto& task : input.test_tasks) distinct[task] = 0;
    std::vector<std::string> task_names;
    for (const auto& entry : distinct) task_names.push_back(entry.first);
    result.selected_test = evaluate(input, result.selected, task_names);
    result.plug_in_test = evaluate(input, result.plug_in, task_names);
  }
  return result;
}

CertificationResult certify_counts(const std::string& name, const Contract& contract,
                                   std::int64_t n,
                                   const std::vector<CalibrationCount>& candidates) {
  validate_contract(contract, name);
  if (candidates.empty()) throw InputError(name + ": no candidates to certify");
  if (n < 1 || n > kMaxTrials) {
    throw InputError(name + ": n (calibration requests) must be in [1, 2^53 = " +
                     std::to_string(kMaxTrials) + "], got " + std::to_string(n));
  }
  for (const auto& candidate : candidates) {
    if (candidate.violations < 0 || candidate.violations > n) {
      throw InputError(name + ": candidate '" + candidate.id + "' has " +
                       std::to_string(candidate.violations) +
                       " violations, outside [0, n = " + std::to_string(n) + "]");
    }
  }
  return decide(name, contract, n, candidates);
}

void require_matches_lock(const Contract& used, const Contract& locked,
                          const std::vector<std::string>& used_candidates,
                          const std::vector<std::string>& locked_candidates,
                          const std::string& where) {
  const auto check = [&](const char* field, double u, double l) {
    if (u != l) {
      throw InputError(where + ": refusing to certify: contract " + field + " is " + exact_text(u) +
                       " but the preregistration lock says " + exact_text(l));
    }
  };
  check("tau", used.tau, locked.tau);
  check("epsilon", used.epsilon, locked.epsilon);
  check("delta", used.delta, locked.delta);
  if (used_candidates != locked_candidates) {
    const auto join = [](const std::vector<std::string>& v) {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
      return s + "]";
    };
    throw InputError(where + ": refusing to certify: candidates " + join(used_candidates) +
                     " differ from the preregistration lock's ordered list " +
                     join(locked_candidates));
  }
}

}  // namespace kvaudit::stats
