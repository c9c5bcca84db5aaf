// Learn-then-Test certification with fixed-sequence testing, the plug-in contrast and the
// test-split evaluation with per-task Bonferroni Clopper–Pearson intervals. See certification.h.
#include "statistics/certification.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "base/errors.h"
#include "statistics/binomial.h"

namespace kvaudit::stats {
namespace {

std::string str(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

void validate_contract(const Contract& c, const std::string& where) {
  if (!(c.tau >= 0.0) || !std::isfinite(c.tau)) {
    throw InputError(where + ": contract tau must be finite and >= 0, got " + str(c.tau));
  }
  if (!(c.epsilon > 0.0 && c.epsilon < 1.0)) {
    throw InputError(where + ": contract epsilon must be in (0, 1), got " + str(c.epsilon));
  }
  if (!(c.delta > 0.0 && c.delta < 1.0)) {
    throw InputError(where + ": contract delta must be in (0, 1), got " + str(c.delta));
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
  for (std::size_t i = 0; i < input.test_tasks.size(); ++i) {
    auto& [violations, requests] = per_task[input.test_tasks[i]];
    ++requests;
    // Full KV: V = 1{U_full − U_full > τ} = 0 for τ ≥ 0.
    const std::int64_t v = policy ? input.candidates[*policy].test_violations[i] : 0;
    violations += v;
    eval.violations += v;
  }
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

}  // namespace

std::vector<std::uint8_t> violations_from_utilities(const std::vector<double>& u_full,
                                                    const std::vector<double>& u_candidate,
                                                    double tau, const std::string& what) {
  if (!(tau >= 0.0) || !std::isfinite(tau)) {
    throw InputError(what + ": tau must be finite and >= 0, got " + str(tau));
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
    throw InputError(where + ": task_alpha must be in (0, 1), got " + str(input.task_alpha));
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
  CertificationResult result =
      decide(input.name, input.contract, static_cast<std::int64_t>(n), counts);

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
      throw InputError(where + ": refusing to certify: contract " + field + " is " + str(u) +
                       " but the preregistration lock says " + str(l));
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
