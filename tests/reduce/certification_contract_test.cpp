// Certification contract kinds (issue 17 items 1, 2, 5): stats::certify with a ContractKind
// (mean loss with Hoeffding–Bentkus or WSR, joint risks, per-task intersection–union, Bonferroni,
// Holm, multi-start) against the formulas computed here from statistics/binomial.h,
// bounded_loss.h and multiple_testing.h; and reduce on synthetic studies: the original contract's
// tables keep their exact columns, a study with contract kinds gets the kind columns with values
// that agree with the generator's utilities, and the lock refuses a contract kind the manifest
// does not declare.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "base/errors.h"
#include "statistics/binomial.h"
#include "statistics/bounded_loss.h"
#include "statistics/certification.h"
#include "statistics/multiple_testing.h"
#include "suite/manifest/prereg.h"
#include "suite/reduce/lock_check.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

using stats::CertificationInput;
using stats::ContractKind;
using stats::TestingProcedure;

// Candidates given by their calibration violation indicators; losses = the indicators (0/1
// utilities), tasks cycle through `tasks` request by request.
CertificationInput input_of(const std::vector<std::vector<std::uint8_t>>& violations,
                            const ContractKind& kind, std::size_t tasks = 1) {
  CertificationInput in;
  in.name = "block";
  in.contract = {0.1, 0.1, 0.1};
  in.kind = kind;
  for (std::size_t j = 0; j < violations.size(); ++j) {
    stats::CertificationCandidate c;
    c.id = "c" + std::to_string(j + 1);
    c.calibration_violations = violations[j];
    if (kind.mean_loss) c.calibration_losses.assign(violations[j].begin(), violations[j].end());
    in.candidates.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < violations.front().size(); ++i)
    in.calibration_tasks.push_back("t" + std::to_string(i % tasks));
  return in;
}

// n requests with k violations spread evenly.
std::vector<std::uint8_t> with_violations(std::size_t n, std::size_t k) {
  std::vector<std::uint8_t> v(n, 0);
  for (std::size_t i = 0; i < k; ++i) v[i * n / k] = 1;
  return v;
}

TEST(CertifyKinds, OtherProcedureOnAMonotoneListAgreesWithTheOriginalPath) {
  const std::vector<std::vector<std::uint8_t>> v = {
      with_violations(300, 5), with_violations(300, 12), with_violations(300, 40)};
  const auto original = stats::certify(input_of(v, ContractKind{}));
  for (auto procedure : {TestingProcedure::holm, TestingProcedure::bonferroni,
                         TestingProcedure::fixed_sequence_multistart}) {
    ContractKind kind;
    kind.procedure = procedure;
    kind.starts = 1;
    const auto r = stats::certify(input_of(v, kind));
    ASSERT_EQ(r.candidates.size(), 3u);
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(r.candidates[j].p_value, original.candidates[j].p_value);  // same p_j
      EXPECT_EQ(r.candidates[j].p_violation, original.candidates[j].p_value);
      EXPECT_EQ(r.candidates[j].violations, original.candidates[j].violations);
    }
    EXPECT_EQ(r.plug_in_policy, original.plug_in_policy);
    EXPECT_EQ(r.k_star, original.k_star);
  }
  EXPECT_TRUE(std::isnan(original.candidates[0].p_violation));  // the original path sets none
}

TEST(CertifyKinds, NonMonotoneListHolmAndBonferroniSelectTheHighestCertified) {
  // c2 is unsafe: the fixed sequence stops there; Holm and Bonferroni still certify c3.
  const std::vector<std::vector<std::uint8_t>> v = {
      with_violations(400, 4), with_violations(400, 120), with_violations(400, 6)};
  std::vector<double> p;
  for (const auto& x : v) {
    std::int64_t k = 0;
    for (auto b : x) k += b;
    p.push_back(stats::ltt_p_value(400, 0.1, k));
  }
  for (auto procedure :
       {TestingProcedure::fixed_sequence, TestingProcedure::holm, TestingProcedure::bonferroni}) {
    ContractKind kind;
    kind.procedure = procedure;
    kind.per_task = procedure == TestingProcedure::fixed_sequence;  // one task: same p-values
    const auto r = stats::certify(input_of(v, kind));
    const auto expected = stats::apply_procedure(procedure, p, 0.1);
    std::optional<std::size_t> highest;
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(r.candidates[j].p_value, p[j]);
      EXPECT_EQ(r.candidates[j].certified, static_cast<bool>(expected.rejected[j]));
      EXPECT_EQ(r.candidates[j].level, expected.level[j]);
      if (expected.rejected[j]) highest = j;
    }
    EXPECT_EQ(r.selected, highest);
    if (procedure == TestingProcedure::fixed_sequence)
      EXPECT_EQ(r.selected_policy, "c1");
    else
      EXPECT_EQ(r.selected_policy, "c3");
  }
}

TEST(CertifyKinds, MeanLossHoeffdingBentkusWsrAndJointRisks) {
  const std::vector<std::vector<std::uint8_t>> v = {with_violations(200, 6),
                                                    with_violations(200, 30)};
  for (auto bound : {stats::LossBound::hoeffding_bentkus, stats::LossBound::wsr}) {
    for (bool joint : {false, true}) {
      ContractKind kind;
      kind.violation = joint;
      kind.mean_loss = true;
      kind.bound = bound;
      kind.loss_epsilon = 0.08;
      auto in = input_of(v, kind);
      // Fractional losses: halve every other one so that the loss and the violation differ.
      for (auto& c : in.candidates)
        for (std::size_t i = 0; i < c.calibration_losses.size(); i += 2)
          c.calibration_losses[i] *= 0.5;
      const auto r = stats::certify(in);
      for (std::size_t j = 0; j < 2; ++j) {
        const auto& losses = in.candidates[j].calibration_losses;
        const double mean = stats::mean_loss(losses, "test");
        const double p_loss = bound == stats::LossBound::wsr
                                  ? stats::wsr_p_value(losses, 0.08, 0.1)
                                  : stats::hoeffding_bentkus_p_value(mean, 200, 0.08);
        EXPECT_EQ(r.candidates[j].mean_loss, mean);
        EXPECT_EQ(r.candidates[j].p_mean_loss, p_loss);
        if (joint) {
          const double p_v = stats::ltt_p_value(200, 0.1, r.candidates[j].violations);
          EXPECT_EQ(r.candidates[j].p_violation, p_v);
          EXPECT_EQ(r.candidates[j].p_value, std::max(p_v, p_loss));
        } else {
          EXPECT_TRUE(std::isnan(r.candidates[j].p_violation));
          EXPECT_EQ(r.candidates[j].p_value, p_loss);
        }
      }
    }
  }
}

TEST(CertifyKinds, PerTaskTakesTheMaxOverTasksAndRefusesABadTask) {
  // 3 tasks of 200 requests (request i is task i mod 3); candidate c1 has 2, 2 and 20
  // violations in them: the aggregate rate 24/600 = 4% certifies at ε = 0.1, task t2's 20/200 =
  // 10% cannot (K = 20 > ⌊nε⌋ − 1 = 19 gives p = 1).
  const std::size_t n = 600;
  const std::size_t want[3] = {2, 2, 20};
  std::vector<std::uint8_t> c1(n, 0);
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t m = 0; m < want[t]; ++m) c1[3 * m + t] = 1;
  ContractKind aggregate;
  aggregate.procedure = TestingProcedure::holm;
  ContractKind per_task = aggregate;
  per_task.per_task = true;
  const auto a = stats::certify(input_of({c1}, aggregate, 3));
  const auto p = stats::certify(input_of({c1}, per_task, 3));
  EXPECT_TRUE(a.candidates[0].certified);
  EXPECT_FALSE(p.candidates[0].certified);
  EXPECT_EQ(p.selected_policy, stats::kFullKvPolicy);
  EXPECT_EQ(p.candidates[0].worst_task, "t2");
  double max_p = 0;
  for (std::size_t t = 0; t < 3; ++t)
    max_p = std::max(max_p, stats::ltt_p_value(200, 0.1, static_cast<std::int64_t>(want[t])));
  EXPECT_EQ(p.candidates[0].p_value, max_p);
  // The plug-in rule asks every task's rate ≤ ε too: t2's 20/200 = ε still qualifies.
  EXPECT_EQ(p.plug_in_policy, "c1");
}

TEST(CertifyKinds, BadKindsAreRefusedNamingTheBlock) {
  const std::vector<std::vector<std::uint8_t>> v = {with_violations(50, 1)};
  const auto refuses = [&](ContractKind kind, const std::string& needle, std::size_t tasks = 1) {
    auto in = input_of(v, kind, tasks);
    if (needle == "calibration tasks") in.calibration_tasks.pop_back();
    try {
      stats::certify(in);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("block: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ContractKind none;
  none.violation = false;
  none.procedure = TestingProcedure::holm;
  refuses(none, "no risk");
  ContractKind loss;
  loss.mean_loss = true;
  loss.loss_epsilon = 1.5;
  refuses(loss, "loss_epsilon");
  ContractKind starts;
  starts.procedure = TestingProcedure::fixed_sequence_multistart;
  starts.starts = 2;
  refuses(starts, "starts");
  ContractKind per_task;
  per_task.per_task = true;
  refuses(per_task, "calibration tasks", 2);
}

// ---- reduce on synthetic studies -----------------------------------------------------------

SyntheticConfig small() {
  SyntheticConfig c;
  c.tasks = {"cwe", "niah_single_1", "vt"};
  c.instances = 16;
  c.calibration = 6;
  c.test = 6;
  c.bootstrap_resamples = 200;
  return c;
}

const Table& table(const ReduceResult& r, const std::string& id) {
  for (const auto& t : r.tables)
    if (t.id == id) return t;
  throw std::runtime_error("no table " + id);
}

const Value& cell(const Table& t, std::size_t row, const std::string& column) {
  return t.rows.at(row).at(t.column_index(column));
}

TEST(CertificationContractReduce, OriginalContractTablesKeepTheirColumns) {
  const auto study = write_synthetic_study(fresh_test_dir(), small());
  const auto r = reduce_study(options_for(study));
  EXPECT_FALSE(r.certification.contract_kinds);
  // The header of certification.csv before contract kinds existed (commit dcba4ef).
  const std::string csv = read_text(r.report_dir / "tables" / "certification.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "block,model,method,benchmark,tau,epsilon,delta,n,violation_cap,k_star,certified,"
            "selected,selected_k,plug_in,test_n,test_violations,test_risk,plug_in_test_risk,"
            "tasks_flagged,calibration_excluded,calibration_imputed,note,partial");
  const std::string candidates =
      read_text(r.report_dir / "tables" / "certification_candidates.csv");
  EXPECT_EQ(candidates.substr(0, candidates.find('\n')),
            "block,model,order,candidate,retention,k,calibration_risk,p_value,tested,certified,"
            "test_violations,test_risk,partial");
  // The original contract written out keeps the hash and gives the same tables.
  auto explicit_cfg = small();
  for (const auto& method : explicit_cfg.certified_methods)
    explicit_cfg.certification_kind[method] =
        "tau = 0.1\nrisk = \"violation\"\nprocedure = \"fixed_sequence\"\nper_task = false\n"
        "sequential = false";
  const auto same = write_synthetic_study(fresh_test_dir("explicit"), explicit_cfg);
  EXPECT_EQ(same.manifest_sha256, study.manifest_sha256);
  const auto r2 = reduce_study(options_for(same));
  for (const char* id : {"certification", "certification_candidates", "certification_task_risk"})
    EXPECT_EQ(read_text(r.report_dir / "tables" / (std::string(id) + ".csv")),
              read_text(r2.report_dir / "tables" / (std::string(id) + ".csv")))
        << id;
}

TEST(CertificationContractReduce, ContractKindsReachTheTablesFiguresAndLock) {
  auto cfg = small();
  // Enough calibration requests (120, 40 per task) and a level (ε = 0.35) at which candidates of
  // both blocks certify (planted violation rates ≈ 0.02–0.06 for keydiff, ≈ 0.25 for snapkv).
  cfg.instances = 60;
  cfg.calibration = 40;
  cfg.test = 10;
  cfg.epsilon = 0.35;
  // keydiff: both risks jointly, per task, Holm. snapkv: mean loss alone with WSR, multi-start.
  cfg.certification_kind["keydiff"] =
      "tau = 0.1\nrisks = [\"violation\", \"mean_loss\"]\nloss_epsilon = 0.2\nprocedure = "
      "\"holm\"\nper_task = true";
  cfg.certification_kind["snapkv"] =
      "risk = \"mean_loss\"\nbound = \"wsr\"\nprocedure = \"fixed_sequence_multistart\"\n"
      "starts = 2";
  const auto study = write_synthetic_study(fresh_test_dir(), cfg);
  const auto r = reduce_study(options_for(study, /*figures=*/false));
  ASSERT_TRUE(r.certification.contract_kinds);
  const Table& cert = table(r, "certification");
  const Table& cand = table(r, "certification_candidates");
  const Table& tasks = table(r, "certification_task_risk");
  ASSERT_EQ(cert.rows.size(), 4u);  // 2 blocks × 2 models
  std::size_t checked = 0;
  for (std::size_t i = 0; i < cert.rows.size(); ++i) {
    const auto block = std::get<std::string>(cell(cert, i, "block"));
    const bool keydiff = block == "keydiff-cert";
    EXPECT_EQ(std::get<std::string>(cell(cert, i, "risks")),
              keydiff ? "violation+mean_loss" : "mean_loss");
    EXPECT_EQ(std::get<std::string>(cell(cert, i, "guarantee")),
              keydiff ? "per task" : "aggregate");
    EXPECT_EQ(std::get<std::string>(cell(cert, i, "procedure")),
              keydiff ? "holm" : "fixed_sequence_multistart");
    EXPECT_EQ(std::get<std::string>(cell(cert, i, "bound")), keydiff ? "hoeffding_bentkus" : "wsr");
    // Per task: no aggregate K*; without the violation risk: no τ.
    EXPECT_TRUE(std::holds_alternative<std::monostate>(cell(cert, i, "k_star")));
    EXPECT_EQ(std::holds_alternative<std::monostate>(cell(cert, i, "tau")), !keydiff);
    ++checked;
  }
  EXPECT_EQ(checked, 4u);
  // Every candidate: 0/1 utilities, so with τ < 1 the loss is the violation indicator: the mean
  // loss is K/n and its HB p-value follows from it; the joint p is the max; the certified flags
  // are the procedure's on those p-values.
  std::map<std::pair<std::string, std::string>, std::vector<double>> p_of;
  for (std::size_t i = 0; i < cand.rows.size(); ++i) {
    const auto block = std::get<std::string>(cell(cand, i, "block"));
    const auto model = std::get<std::string>(cell(cand, i, "model"));
    const double p = std::get<double>(cell(cand, i, "p_value"));
    const double p_loss = std::get<double>(cell(cand, i, "p_mean_loss"));
    const double loss = std::get<double>(cell(cand, i, "mean_loss"));
    EXPECT_GE(loss, 0.0);
    if (block == "keydiff-cert") {
      const double risk = std::get<double>(cell(cand, i, "calibration_risk"));
      EXPECT_DOUBLE_EQ(loss, risk);
      const double p_v = std::get<double>(cell(cand, i, "p_violation"));
      EXPECT_EQ(p, std::max(p_v, p_loss));
      EXPECT_FALSE(std::get<std::string>(cell(cand, i, "worst_task")).empty());
    } else {
      EXPECT_EQ(p, p_loss);
      EXPECT_TRUE(std::holds_alternative<std::monostate>(cell(cand, i, "calibration_risk")));
    }
    p_of[{block, model}].push_back(p);
  }
  std::set<std::string> certified_blocks;
  for (const auto& run : r.certification.runs) {
    const auto& block = r.study->manifest.certifications[run.block];
    const auto& p = p_of.at({block.name, r.study->manifest.models[run.model].name});
    const auto expected = stats::apply_procedure(
        stats::parse_testing_procedure(block.procedure, "test"), p, block.delta,
        static_cast<std::size_t>(std::max<std::int64_t>(block.starts, 1)));
    std::optional<std::size_t> highest;
    for (std::size_t j = 0; j < p.size(); ++j) {
      EXPECT_EQ(run.result.candidates[j].certified, static_cast<bool>(expected.rejected[j]));
      if (expected.rejected[j]) highest = j;
    }
    EXPECT_EQ(run.result.selected, highest);
    certified_blocks.insert(block.name + (highest ? "" : " (none)"));
  }
  // Not a vacuous check: each block certifies something on some model.
  EXPECT_TRUE(certified_blocks.count("keydiff-cert")) << ::testing::PrintToString(certified_blocks);
  EXPECT_TRUE(certified_blocks.count("snapkv-cert")) << ::testing::PrintToString(certified_blocks);
  // The per-task table flags the kind of guarantee.
  for (std::size_t i = 0; i < tasks.rows.size(); ++i)
    EXPECT_EQ(std::get<std::string>(cell(tasks, i, "guarantee")),
              std::get<std::string>(cell(tasks, i, "block")) == "keydiff-cert" ? "per task"
                                                                               : "aggregate");
  // The CSV and the summary carry the columns (one writer for every table).
  const std::string csv = read_text(r.report_dir / "tables" / "certification.csv");
  EXPECT_NE(csv.find("risks,bound,loss_epsilon,procedure,starts,guarantee"), std::string::npos);
  EXPECT_NE(csv.find("per task"), std::string::npos);

  // The lock carries the kinds; a lock whose contract differs from the manifest's is refused.
  const auto lock = manifest::load_prereg(study.results_dir);
  EXPECT_NO_THROW(require_same_contracts(lock, "prereg.json", r.study->manifest));
  for (const auto& [key, edit] :
       std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>>{
           {"per_task", [](nlohmann::json& c) { c.erase("per_task"); }},
           {"procedure", [](nlohmann::json& c) { c["procedure"] = "bonferroni"; }},
       }) {
    SCOPED_TRACE(key);
    auto damaged = lock;
    for (auto& c : damaged["contracts"])
      if (c["name"] == "keydiff-cert") edit(c);
    try {
      require_same_contracts(damaged, "prereg.json", r.study->manifest);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("contracts[keydiff-cert]"), std::string::npos)
          << e.what();
    }
  }
  // A kind the lock has and the manifest's block lacks.
  auto extra = lock;
  for (auto& c : extra["contracts"])
    if (c["name"] == "snapkv-cert") c["sequential"] = true;
  EXPECT_THROW(require_same_contracts(extra, "prereg.json", r.study->manifest), InputError);
}

TEST(CertificationContractReduce, SequentialBlocksAreReplayedAndFiguresNameTheKinds) {
  auto cfg = small();
  cfg.certification_kind["snapkv"] = "tau = 0.1\nsequential = true";
  const auto study = write_synthetic_study(fresh_test_dir(), cfg);
  const auto r = reduce_study(options_for(study, /*figures=*/true));
  const Table& cert = table(r, "certification");
  for (std::size_t i = 0; i < cert.rows.size(); ++i) {
    const bool sequential = std::get<std::string>(cell(cert, i, "block")) == "snapkv-cert";
    EXPECT_EQ(std::holds_alternative<std::string>(cell(cert, i, "sequential_selected")),
              sequential);
    if (sequential) {
      const double saved = std::get<double>(cell(cert, i, "compute_saved"));
      EXPECT_GE(saved, 0.0);
      EXPECT_LE(saved, 1.0);
      EXPECT_GT(std::get<std::int64_t>(cell(cert, i, "sequential_requests")), 0);
    }
  }
  for (const auto& run : r.certification.runs)
    EXPECT_EQ(run.sequential.has_value(),
              r.study->manifest.certifications[run.block].name == "snapkv-cert");
  // The risk figure labels the sequential block's kind.
  bool labelled = false;
  for (const auto& f : r.figures)
    if (f.name.rfind("risk_", 0) == 0) {
      const std::string gp = read_text(r.report_dir / "figures" / (f.name + ".gp"));
      labelled = labelled || gp.find("snapkv [aggregate, sequential]") != std::string::npos;
    }
  EXPECT_TRUE(labelled);
}

}  // namespace
}  // namespace kvaudit::reduce::testing
