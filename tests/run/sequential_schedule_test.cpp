// suite/run/sequential_schedule.h on a small sequential study (no model: cell outcomes are
// synthetic): the plans, waves in the preregistered order, dropped cells, the same decisions as
// reduce's replay, resume after an interruption, the LPT remainder and the published decisions.
#include "suite/run/sequential_schedule.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/errors.h"
#include "statistics/rng.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "tests/run/sequential_study_text.h"

namespace kvaudit::run {
namespace {

using stats::SequentialDecision;

// 2 tasks × 400 instances, 200 + 200 calibration per task → n = 400 calibration requests; three
// candidates of snapkv plus knorm cells that are not part of the block.
std::string study_text(const std::string& block_extra = "sequential = true\n") {
  testing::SequentialStudy study;
  study.methods = "\"snapkv\", \"knorm\"";
  study.protocols = "\"query-aware\", \"query-agnostic\"";
  study.block_extra = block_extra;
  return testing::sequential_study_text(study);
}

// What resume.h's pending_units gives (re-derived here so that this test needs no kvaudit_run):
// units with at least one cell not done, cells ascending.
std::vector<PendingUnit> pending_of(const manifest::Expansion& e,
                                    const std::set<std::size_t>& done) {
  std::vector<PendingUnit> out(e.units.size());
  for (std::size_t u = 0; u < e.units.size(); ++u) out[u].unit = u;
  for (std::size_t c = 0; c < e.cells.size(); ++c) {
    if (done.count(c) == 0) out[e.cells[c].unit].cells.push_back(c);
  }
  std::erase_if(out, [](const PendingUnit& p) { return p.cells.empty(); });
  return out;
}

struct Study {
  manifest::Manifest manifest;
  manifest::Expansion expansion;
  std::vector<PendingUnit> pending;  // everything
};

Study make_study(const std::string& extra = "sequential = true\n") {
  Study s{manifest::parse_manifest(study_text(extra), "seq.toml"), {}, {}};
  s.expansion = manifest::expand(s.manifest);
  s.pending = pending_of(s.expansion, {});
  return s;
}

// Synthetic outcome of a cell: full KV scores 1; candidate budget 0.25 never violates, 0.5 with
// probability 0.01, 0.75 with probability 0.3 (score 0); a violation is a score drop of 1 > τ.
// Cells listed in `failed` fail (status error).
CellOutcome synthetic(const Study& s, std::size_t cell, const std::set<std::size_t>& failed = {}) {
  const auto& c = s.expansion.cells[cell];
  CellOutcome o{cell, records::CellStatus::ok, 1.0};
  if (failed.count(cell) != 0) {
    o.status = records::CellStatus::error;
    o.score = std::nan("");
    return o;
  }
  if (c.method < 0) return o;
  const double rate = c.budget == 0.25 ? 0.0 : c.budget == 0.5 ? 0.01 : 0.3;
  const auto w = stats::philox_words(7, c.unit, 0, 0, stats::RandomPurpose::simulation)[0];
  const double u = stats::unit_double(w ^ static_cast<std::uint64_t>(c.budget * 1000));
  o.score = u < rate ? 0.0 : 1.0;
  return o;
}

// Runs the sequential phase to the end with synthetic outcomes; returns the cells it ran.
std::set<std::size_t> run_waves(const Study& s, SequentialScheduler& scheduler,
                                std::size_t world_size, const std::set<std::size_t>& failed = {},
                                std::size_t max_waves = 1u << 30) {
  std::map<std::size_t, const PendingUnit*> by_unit;
  for (const auto& u : s.pending) by_unit[u.unit] = &u;
  std::set<std::size_t> ran;
  for (std::size_t w = 0; w < max_waves; ++w) {
    const auto wave = scheduler.next_wave(world_size);
    if (wave.empty()) break;
    EXPECT_LE(wave.size(), world_size);
    std::vector<CellOutcome> outcomes;
    for (std::size_t unit : wave) {
      const auto it = by_unit.find(unit);
      if (it == by_unit.end()) continue;  // nothing pending on it (resume)
      for (std::size_t c : scheduler.cells_to_run(it->second->cells)) {
        EXPECT_TRUE(ran.insert(c).second) << "cell run twice: " << c;
        outcomes.push_back(synthetic(s, c, failed));
      }
    }
    scheduler.observe(outcomes);
  }
  return ran;
}

// reduce's replay over all the (synthetic) records, in canonical request order.
reduce::SequentialCalibrationResult replay_from_records(const Study& s, const SequentialPlan& plan,
                                                        const std::set<std::size_t>& failed = {}) {
  const std::size_t n = plan.units.size();
  reduce::SequentialCalibrationInput input;
  input.block = plan.block_name;
  input.seed = s.manifest.study.seed;
  input.epsilon = plan.epsilon;
  input.delta = plan.delta;
  input.excluded.assign(n, 0);
  for (std::size_t j = 0; j < plan.candidate_ids.size(); ++j) {
    reduce::SequentialCandidateLosses c;
    c.id = plan.candidate_ids[j];
    c.losses.assign(n, 0.0);
    c.missing.assign(n, 0);
    for (std::size_t pos = 0; pos < n; ++pos) {
      const auto full = synthetic(s, plan.reference_cells[pos], failed);
      const auto cand = synthetic(s, plan.candidate_cells[j][pos], failed);
      const std::size_t request = plan.canonical_index[pos];
      if (full.status != records::CellStatus::ok || cand.status != records::CellStatus::ok) {
        c.missing[request] = 1;
      } else {
        c.losses[request] = reduce::sequential_loss(plan.risk, plan.tau, full.score, cand.score);
      }
    }
    input.candidates.push_back(std::move(c));
  }
  return reduce::replay_sequential_calibration(input);
}

TEST(SequentialSchedule, PlansFollowThePreregisteredOrder) {
  const Study s = make_study();
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  ASSERT_EQ(plans.size(), 1u);
  const auto& plan = plans[0];
  EXPECT_EQ(plan.name, "c/m");
  ASSERT_EQ(plan.units.size(), 400u);
  ASSERT_EQ(plan.candidate_ids,
            (std::vector<std::string>{"snapkv@0.25", "snapkv@0.5", "snapkv@0.75"}));
  const auto order = reduce::sequential_request_order(4242, "c", 400);  // the block name
  std::set<std::size_t> units;
  for (std::size_t p = 0; p < 400; ++p) {
    EXPECT_EQ(plan.canonical_index[p], order[p]);
    const auto& u = s.expansion.units[plan.units[p]];
    EXPECT_EQ(u.split, manifest::Split::calibration);
    units.insert(plan.units[p]);
    const auto& ref = s.expansion.cells[plan.reference_cells[p]];
    EXPECT_EQ(ref.method, -1);
    EXPECT_EQ(ref.unit, plan.units[p]);
    EXPECT_EQ(ref.protocol, Protocol::query_agnostic);
    for (std::size_t j = 0; j < 3; ++j) {
      const auto& c = s.expansion.cells[plan.candidate_cells[j][p]];
      EXPECT_EQ(c.unit, plan.units[p]);
      EXPECT_EQ(c.budget, (std::vector<double>{0.25, 0.5, 0.75})[j]);
      EXPECT_EQ(c.protocol, Protocol::query_agnostic);
    }
  }
  EXPECT_EQ(units.size(), 400u);
  // Canonical order: (task, instance) ascending.
  std::vector<std::size_t> canonical(400);
  for (std::size_t p = 0; p < 400; ++p) canonical[plan.canonical_index[p]] = plan.units[p];
  for (std::size_t i = 1; i < 400; ++i) {
    const auto& a = s.expansion.units[canonical[i - 1]];
    const auto& b = s.expansion.units[canonical[i]];
    EXPECT_TRUE(a.task < b.task || (a.task == b.task && a.instance < b.instance));
  }
  // No plan without sequential = true.
  const Study plain = make_study("");
  EXPECT_TRUE(plan_sequential_calibration(plain.manifest, plain.expansion).empty());
}

TEST(SequentialSchedule, WavesReachTheDecisionsOfReducesReplayAndDropCells) {
  const Study s = make_study();
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  const std::set<std::size_t> failed = {plans[0].candidate_cells[1][3]};  // one failed cell
  SequentialScheduler scheduler(plans, s.expansion, s.pending);
  const auto ran = run_waves(s, scheduler, 4, failed);
  EXPECT_TRUE(scheduler.finished());
  std::printf("%s", scheduler.decisions_json(0).c_str());
  const auto expected = replay_from_records(s, plans[0], failed);
  const auto& got = scheduler.candidates(0);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(got[j].decision, expected.candidates[j].decision) << j;
    EXPECT_EQ(got[j].requests_used, expected.candidates[j].requests_used) << j;
    EXPECT_EQ(got[j].e_value, expected.candidates[j].e_value) << j;
    EXPECT_EQ(got[j].stopped_early, expected.candidates[j].stopped_early) << j;
    EXPECT_EQ(got[j].certified, expected.candidates[j].certified) << j;
    // Cells of candidate j that ran: its requests, rounded up to the end of the wave.
    std::int64_t cells_run = 0;
    for (std::size_t c : plans[0].candidate_cells[j]) cells_run += ran.count(c) ? 1 : 0;
    EXPECT_GE(cells_run, got[j].requests_used) << j;
    EXPECT_LT(cells_run, got[j].requests_used + 4) << j;
  }
  EXPECT_EQ(expected.candidates[1].imputed, 1);  // the failed cell counted as a loss of 1
  EXPECT_EQ(got[0].decision, SequentialDecision::certified);
  EXPECT_TRUE(got[1].certified || got[1].decision != SequentialDecision::certified);
  // Dropped cells never ran, and belong to stopped candidates only.
  const auto snapkv =
      static_cast<std::int16_t>(s.manifest.find_method("snapkv") - s.manifest.methods.data());
  const auto dropped = scheduler.dropped_cells();
  EXPECT_FALSE(dropped.empty());
  for (std::size_t c : dropped) {
    EXPECT_EQ(ran.count(c), 0u);
    EXPECT_EQ(s.expansion.cells[c].method, snapkv);
  }
  // The LPT remainder: no issued unit, no dropped cell, and every test-split and knorm cell.
  const auto rest = scheduler.remaining(s.pending);
  std::set<std::size_t> rest_cells;
  for (const auto& u : rest) {
    for (std::size_t c : u.cells) rest_cells.insert(c);
  }
  for (std::size_t c : dropped) EXPECT_EQ(rest_cells.count(c), 0u);
  for (std::size_t c = 0; c < s.expansion.cells.size(); ++c) {
    const bool accounted =
        ran.count(c) + rest_cells.count(c) +
            static_cast<std::size_t>(std::binary_search(dropped.begin(), dropped.end(), c)) ==
        1;
    EXPECT_TRUE(accounted) << "cell " << c << " run, remaining or dropped: exactly one";
  }
}

TEST(SequentialSchedule, ResumeReachesTheSameDecisions) {
  const Study s = make_study();
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  SequentialScheduler uninterrupted(plans, s.expansion, s.pending);
  run_waves(s, uninterrupted, 3);

  // Interrupted after 20 waves; the next launch sees those cells as done.
  SequentialScheduler first(plans, s.expansion, s.pending);
  const auto ran = run_waves(s, first, 3, {}, 20);
  EXPECT_FALSE(first.finished());
  std::vector<CellOutcome> done;
  for (std::size_t c : ran) done.push_back(synthetic(s, c));
  Study resumed = s;
  resumed.pending = pending_of(s.expansion, ran);
  SequentialScheduler second(plans, s.expansion, resumed.pending);
  second.observe(done);
  run_waves(resumed, second, 3);
  EXPECT_TRUE(second.finished());
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(second.candidates(0)[j].decision, uninterrupted.candidates(0)[j].decision);
    EXPECT_EQ(second.candidates(0)[j].requests_used, uninterrupted.candidates(0)[j].requests_used);
  }
  EXPECT_EQ(second.decisions_json(0), uninterrupted.decisions_json(0));
}

TEST(SequentialSchedule, PublishesTheDecisionsOnceAndRefusesDifferentOnes) {
  const Study s = make_study();
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  SequentialScheduler scheduler(plans, s.expansion, s.pending);
  const auto dir = std::filesystem::path(KVAUDIT_RUN_TEST_TMP) / "sequential_publish";
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(scheduler.publish_decisions(dir).empty());  // not finished: nothing written
  run_waves(s, scheduler, 2);
  const auto written = scheduler.publish_decisions(dir);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0], dir / "sequential" / "c.json");
  std::ifstream in(written[0]);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("block"), "c");
  ASSERT_EQ(j.at("plans").size(), 1u);
  EXPECT_EQ(j.at("plans")[0].at("candidates")[0].at("decision"), "certified");
  EXPECT_TRUE(scheduler.publish_decisions(dir).empty());  // same content: nothing to do
  {
    std::ofstream out(written[0], std::ios::trunc);
    out << "{}\n";
  }
  EXPECT_THROW(scheduler.publish_decisions(dir), InputError);
}

// The wave loop of rank 0 in a world of 3, the other ranks' units played by a fake exchange that
// computes their outcomes the same way: the same decisions as the direct simulation, rank 0 runs
// exactly the first unit of every wave, and a stop request ends the phase after that wave.
TEST(SequentialSchedule, WaveLoopOfOneRankAgreesWithTheWholeWorld) {
  const Study s = make_study();
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  SequentialScheduler whole(plans, s.expansion, s.pending);
  run_waves(s, whole, 3);

  std::map<std::size_t, const PendingUnit*> by_unit;
  for (const auto& u : s.pending) by_unit[u.unit] = &u;
  SequentialScheduler scheduler(plans, s.expansion, s.pending);
  std::vector<std::size_t> first_units;
  const RunWaveUnit run_unit = [&](std::size_t unit, std::span<const std::size_t> cells) {
    first_units.push_back(unit);
    std::vector<records::CellRecord> out;
    for (std::size_t c : cells) {
      const auto o = synthetic(s, c);
      records::CellRecord r;
      r.cell_id = s.expansion.cells[c].id;
      r.status = o.status;
      r.score = o.score;
      out.push_back(r);
    }
    return out;
  };
  std::size_t exchanges = 0;
  const WaveExchange exchange = [&](std::span<const std::size_t> wave,
                                    std::vector<CellOutcome> mine, bool&) {
    ++exchanges;
    EXPECT_EQ(first_units.back(), wave[0]);
    for (std::size_t r = 1; r < wave.size(); ++r) {
      for (std::size_t c : scheduler.cells_to_run(by_unit.at(wave[r])->cells)) {
        mine.push_back(synthetic(s, c));
      }
    }
    return mine;
  };
  const auto result =
      run_sequential_waves(scheduler, s.pending, 0, 3, run_unit, exchange, [] { return false; });
  EXPECT_FALSE(result.stopped);
  EXPECT_EQ(result.waves, exchanges);
  EXPECT_EQ(result.units_run, first_units.size());
  EXPECT_TRUE(scheduler.finished());
  EXPECT_EQ(scheduler.decisions_json(0), whole.decisions_json(0));
  EXPECT_EQ(scheduler.dropped_cells(), whole.dropped_cells());

  // A stop request before the 6th wave: that wave only exchanges (with stop), then the phase ends.
  SequentialScheduler stopped(plans, s.expansion, s.pending);
  int polls = 0;
  std::size_t stop_exchanges = 0;
  const WaveExchange passive = [&](std::span<const std::size_t>, std::vector<CellOutcome> mine,
                                   bool& stop) {
    ++stop_exchanges;
    EXPECT_EQ(stop, polls >= 6);
    return mine;
  };
  const auto r2 = run_sequential_waves(stopped, s.pending, 0, 3, run_unit, passive,
                                       [&] { return ++polls >= 6; });
  EXPECT_TRUE(r2.stopped);
  EXPECT_EQ(r2.waves, 6u);
  EXPECT_EQ(r2.units_run, 5u);
  EXPECT_FALSE(stopped.finished());
  EXPECT_THROW(run_sequential_waves(stopped, s.pending, 3, 3, run_unit, passive, {}),
               InternalError);
}

// A fixed-n block sharing the sequential block's cells keeps every one of them.
TEST(SequentialSchedule, CellsOfAFixedNBlockAreNeverDropped) {
  const std::string twin = R"(
[[certification]]
name = "d"
grid = "g"
benchmark = "r"
method = "snapkv"
protocol = "query-agnostic"
backend = "sdpa"
candidates = [0.5, 0.75]
tau = 0.1
epsilon = 0.05
delta = 0.05
calibration = 200
test = 200
)";
  const Study s = make_study("sequential = true\n" + twin);
  const auto plans = plan_sequential_calibration(s.manifest, s.expansion);
  ASSERT_EQ(plans.size(), 1u);  // only c is sequential
  const auto keep = fixed_n_calibration_cells(s.manifest, s.expansion);
  EXPECT_EQ(keep.size(), 2u * 400u);  // d's two candidates on its 400 calibration units
  SequentialScheduler scheduler(plans, s.expansion, s.pending, keep);
  run_waves(s, scheduler, 4);
  EXPECT_TRUE(scheduler.finished());
  const auto dropped = scheduler.dropped_cells();
  for (std::size_t c : dropped) EXPECT_FALSE(std::binary_search(keep.begin(), keep.end(), c));
  // Candidate 0.25 (only in c) still loses its later cells once certified.
  std::size_t dropped_025 = 0;
  for (std::size_t c : dropped) dropped_025 += s.expansion.cells[c].budget == 0.25 ? 1 : 0;
  EXPECT_GT(dropped_025, 0u);
  EXPECT_EQ(dropped_025, dropped.size());
  // Without the guard, 0.5 and 0.75 cells would be dropped too.
  SequentialScheduler unguarded(plans, s.expansion, s.pending);
  run_waves(s, unguarded, 4);
  EXPECT_GT(unguarded.dropped_cells().size(), dropped.size());
}

TEST(SequentialSchedule, RefusesUnsupportedContracts) {
  // The manifest parser refuses this combination (docs/MANIFEST.md); the scheduler refuses it
  // too, for a Manifest built another way.
  const Study s = make_study("sequential = true\n");
  manifest::Manifest m = s.manifest;
  m.certifications.at(0).procedure = "bonferroni";
  try {
    plan_sequential_calibration(m, s.expansion);
    FAIL() << "a sequential bonferroni block was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("certification block 'c'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fixed_sequence"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::run
