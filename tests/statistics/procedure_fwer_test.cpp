// Family-wise error of the issue-17 procedures by simulation (docs/design/statistics.md
// §Bounded-loss risks, procedures and planning; the model is certification_fwer_test.cpp).
// Every simulation runs 10,000 trials from fixed Philox seeds (tests/statistics/
// simulation_stream.h) and passes when the false-certification rate — P(at least one unsafe
// candidate certified) — is ≤ δ + 3 Monte Carlo SE, SE = sqrt(δ(1 − δ)/trials). Each sits next to a
// naive rule that uses the same data and must exceed δ + 3 SE, which shows that the simulation can
// see an invalid procedure:
//   1. fixed sequence, multistart (S = 3), Bonferroni, Holm on exact binomial p-values over a
//      non-monotone list with six true nulls (four at the boundary R = ε); naive: certify every
//      candidate with p ≤ δ.
//   2. the same four procedures on Hoeffding–Bentkus and on WSR mean-loss p-values (0/1 and
//      continuous losses, three nulls at mean = α); naive: plug-in mean ≤ α.
//   3. two risks certified jointly (violation rate and mean loss, p = max); naive: the violation
//      p-value alone.
//   4. per-task certification by the intersection–union test (p_j = max over tasks of p_jt, no
//      Bonferroni factor); naive: the pooled (aggregate) certificate claimed for every task.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "statistics/binomial.h"
#include "statistics/bounded_loss.h"
#include "statistics/multiple_testing.h"
#include "tests/statistics/simulation_stream.h"

namespace kvaudit::stats {
namespace {

constexpr int kTrials = 10000;

// P{Bin(n, rate) ≤ k} for k = 0..n, for drawing K by inversion with one uniform.
std::vector<double> cdf_table(std::int64_t n, double rate) {
  std::vector<double> table(static_cast<std::size_t>(n) + 1);
  for (std::int64_t k = 0; k <= n; ++k)
    table[static_cast<std::size_t>(k)] = binomial_cdf(n, rate, k);
  table.back() = 1.0;
  return table;
}

std::int64_t draw_binomial(const std::vector<double>& table, double u) {
  return static_cast<std::int64_t>(std::upper_bound(table.begin(), table.end(), u) - table.begin());
}

bool any_null_rejected(const ProcedureResult& r, const std::vector<bool>& is_null) {
  for (std::size_t j = 0; j < is_null.size(); ++j) {
    if (is_null[j] && r.rejected[j]) return true;
  }
  return false;
}

struct Rate {
  std::string name;
  int errors = 0;
  double rate() const { return static_cast<double>(errors) / kTrials; }
};

double bound(double delta) { return delta + 3.0 * std::sqrt(delta * (1 - delta) / kTrials); }

void report_and_check(const std::vector<Rate>& valid, const Rate& naive, double delta) {
  for (const auto& r : valid) {
    std::printf("  %-40s false-certification rate %.4f (bound %.4f)\n", r.name.c_str(), r.rate(),
                bound(delta));
    EXPECT_LE(r.rate(), bound(delta)) << r.name;
  }
  std::printf("  %-40s false-certification rate %.4f (must exceed %.4f)\n", naive.name.c_str(),
              naive.rate(), bound(delta));
  EXPECT_GT(naive.rate(), bound(delta)) << naive.name;
}

const std::array<TestingProcedure, 4> kProcedures = {
    TestingProcedure::fixed_sequence, TestingProcedure::fixed_sequence_multistart,
    TestingProcedure::bonferroni, TestingProcedure::holm};

std::vector<Rate> procedure_rates(const std::string& prefix) {
  std::vector<Rate> rates;
  for (const auto p : kProcedures) rates.push_back({prefix + to_string(p)});
  return rates;
}

void count_procedures(std::vector<Rate>& rates, const std::vector<double>& p, double delta,
                      const std::vector<bool>& is_null) {
  for (std::size_t i = 0; i < kProcedures.size(); ++i) {
    if (any_null_rejected(apply_procedure(kProcedures[i], p, delta, 3), is_null)) {
      ++rates[i].errors;
    }
  }
}

TEST(ProcedureFwer, BinomialPValuesEveryProcedure) {
  // n = 1200, ε = δ = 0.05; ten candidates, not monotone; nulls: R ≥ ε.
  constexpr std::int64_t kN = 1200;
  const double eps = 0.05;
  const double delta = 0.05;
  const std::vector<double> rates = {0.02, 0.03, 0.05, 0.03, 0.05, 0.06, 0.04, 0.05, 0.08, 0.05};
  std::vector<bool> is_null;
  std::vector<std::vector<double>> tables;
  for (const double r : rates) {
    is_null.push_back(r >= eps);
    tables.push_back(cdf_table(kN, r));
  }
  auto valid = procedure_rates("binomial p, ");
  Rate naive{"binomial p, naive: every p <= delta"};
  std::vector<double> p(rates.size());
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(171, static_cast<std::uint32_t>(trial));
    for (std::size_t j = 0; j < rates.size(); ++j) {
      p[j] = ltt_p_value(kN, eps, draw_binomial(tables[j], stream.uniform()));
    }
    count_procedures(valid, p, delta, is_null);
    bool naive_error = false;
    for (std::size_t j = 0; j < p.size(); ++j) naive_error |= is_null[j] && p[j] <= delta;
    if (naive_error) ++naive.errors;
  }
  report_and_check(valid, naive, delta);
}

// Losses of one request for a candidate: 0/1 with P(1) = mean, or continuous u^a with
// a = 1/mean − 1 (mean exactly `mean`, values in [0, 1]).
struct LossModel {
  double mean = 0;
  bool binary = false;
  double draw(testing::SimulationStream& stream) const {
    const double u = stream.uniform();
    return binary ? (u < mean ? 1.0 : 0.0) : std::pow(u, 1.0 / mean - 1.0);
  }
};

void mean_loss_simulation(bool wsr) {
  // n = 200 requests, α = 0.1 (mean-loss limit), δ = 0.1; nulls: mean ≥ α.
  constexpr std::size_t kN = 200;
  const double alpha = 0.1;
  const double delta = 0.1;
  const std::vector<LossModel> models = {{0.03, false}, {0.1, true},   {0.04, true},
                                         {0.1, false},  {0.02, false}, {0.1, true}};
  std::vector<bool> is_null;
  for (const auto& m : models) is_null.push_back(m.mean >= alpha);
  const std::string prefix = wsr ? "WSR p, " : "HB p, ";
  auto valid = procedure_rates(prefix);
  Rate naive{prefix + "naive: plug-in mean <= alpha"};
  std::vector<double> p(models.size());
  std::vector<double> losses(kN);
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(wsr ? 272 : 273, static_cast<std::uint32_t>(trial));
    bool naive_error = false;
    for (std::size_t j = 0; j < models.size(); ++j) {
      for (auto& x : losses) x = models[j].draw(stream);
      const double r_hat = mean_loss(losses, "simulation");
      p[j] = wsr ? wsr_p_value(losses, alpha, delta)
                 : hoeffding_bentkus_p_value(r_hat, static_cast<std::int64_t>(kN), alpha);
      naive_error |= is_null[j] && r_hat <= alpha;
    }
    count_procedures(valid, p, delta, is_null);
    if (naive_error) ++naive.errors;
  }
  report_and_check(valid, naive, delta);
}

TEST(ProcedureFwer, HoeffdingBentkusMeanLossEveryProcedure) { mean_loss_simulation(false); }

TEST(ProcedureFwer, WsrMeanLossEveryProcedure) { mean_loss_simulation(true); }

TEST(ProcedureFwer, TwoRisksJointlyByTheMaxPValue) {
  // Loss x in [0, 1] per request; violation = 1{x > 0.5}. Contract: violation rate ≤ ε = 0.1 and
  // mean loss ≤ α = 0.08, δ = 0.1, n = 400. A candidate is unsafe if either risk is at or above
  // its limit. Models (value, probability of that value, else 0):
  //   safe        0.3 w.p. 0.1    (mean 0.03, violations 0)
  //   mean-null   0.4 w.p. 0.2    (mean 0.08 = α, violations 0): the violation test alone passes
  //   viol-null   0.51 w.p. 0.1   (violation rate 0.1 = ε, mean 0.051)
  constexpr std::int64_t kN = 400;
  const double eps = 0.1;
  const double alpha = 0.08;
  const double delta = 0.1;
  struct Model {
    double value, probability;
    bool null;
  };
  const std::vector<Model> models = {
      {0.3, 0.1, false}, {0.4, 0.2, true}, {0.3, 0.05, false}, {0.51, 0.1, true}, {0.4, 0.2, true}};
  std::vector<bool> is_null;
  for (const auto& m : models) is_null.push_back(m.null);
  auto valid = procedure_rates("max(binomial, HB) p, ");
  Rate naive{"naive: violation p alone, fixed sequence"};
  std::vector<double> joint(models.size());
  std::vector<double> violation_only(models.size());
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(374, static_cast<std::uint32_t>(trial));
    for (std::size_t j = 0; j < models.size(); ++j) {
      std::int64_t violations = 0;
      double sum = 0;
      for (std::int64_t i = 0; i < kN; ++i) {
        const double x = stream.uniform() < models[j].probability ? models[j].value : 0.0;
        violations += x > 0.5 ? 1 : 0;
        sum += x;
      }
      violation_only[j] = ltt_p_value(kN, eps, violations);
      const double r_hat = std::min(1.0, sum / static_cast<double>(kN));
      joint[j] = joint_p_value({violation_only[j], hoeffding_bentkus_p_value(r_hat, kN, alpha)});
    }
    count_procedures(valid, joint, delta, is_null);
    if (any_null_rejected(apply_procedure(TestingProcedure::fixed_sequence, violation_only, delta),
                          is_null)) {
      ++naive.errors;
    }
  }
  report_and_check(valid, naive, delta);
}

TEST(ProcedureFwer, PerTaskByTheIntersectionUnionTest) {
  // Four tasks of 400 calibration requests each, ε = δ = 0.05. A candidate is safe per task when
  // every task's violation rate is < ε. Candidates (rates per task):
  //   0: {0.01, 0.01, 0.02, 0.01}   safe
  //   1: {0.01, 0.01, 0.01, 0.05}   unsafe on task 4 only (aggregate 0.02)
  //   2: {0.01, 0.02, 0.01, 0.01}   safe
  //   3: {0.00, 0.01, 0.01, 0.06}   unsafe on task 4
  // Intersection–union: p_j = max_t p_jt (p_jt the binomial p of task t), any procedure over p_j.
  // Naive: certify on the pooled 1600 requests and claim every task ≤ ε.
  constexpr std::int64_t kPerTask = 400;
  const double eps = 0.05;
  const double delta = 0.05;
  const std::vector<std::array<double, 4>> rates = {{0.01, 0.01, 0.02, 0.01},
                                                    {0.01, 0.01, 0.01, 0.05},
                                                    {0.01, 0.02, 0.01, 0.01},
                                                    {0.0, 0.01, 0.01, 0.06}};
  std::vector<bool> is_null;
  std::vector<std::array<std::vector<double>, 4>> tables(rates.size());
  for (std::size_t j = 0; j < rates.size(); ++j) {
    is_null.push_back(*std::max_element(rates[j].begin(), rates[j].end()) >= eps);
    for (std::size_t t = 0; t < 4; ++t) tables[j][t] = cdf_table(kPerTask, rates[j][t]);
  }
  auto valid = procedure_rates("per task (max over tasks) p, ");
  Rate naive{"naive: pooled certificate claimed per task"};
  std::vector<double> per_task_p(rates.size());
  std::vector<double> pooled_p(rates.size());
  for (int trial = 0; trial < kTrials; ++trial) {
    testing::SimulationStream stream(475, static_cast<std::uint32_t>(trial));
    for (std::size_t j = 0; j < rates.size(); ++j) {
      std::vector<double> task_p(4);
      std::int64_t pooled = 0;
      for (std::size_t t = 0; t < 4; ++t) {
        const std::int64_t k = draw_binomial(tables[j][t], stream.uniform());
        pooled += k;
        task_p[t] = ltt_p_value(kPerTask, eps, k);
      }
      per_task_p[j] = joint_p_value(task_p);
      pooled_p[j] = ltt_p_value(4 * kPerTask, eps, pooled);
    }
    count_procedures(valid, per_task_p, delta, is_null);
    if (any_null_rejected(apply_procedure(TestingProcedure::fixed_sequence, pooled_p, delta),
                          is_null)) {
      ++naive.errors;
    }
  }
  report_and_check(valid, naive, delta);
}

}  // namespace
}  // namespace kvaudit::stats
