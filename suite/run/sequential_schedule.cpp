// Sequential calibration scheduling (see sequential_schedule.h).
#include "suite/run/sequential_schedule.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/attention_backend.h"
#include "base/errors.h"
#include "base/protocol.h"
#include "statistics/certification.h"
#include "suite/common/atomic_file.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::run {
namespace {

using stats::SequentialDecision;

bool usable(const CellOutcome& o) {
  return o.status == records::CellStatus::ok && std::isfinite(o.score);
}

}  // namespace

std::vector<SequentialPlan> plan_sequential_calibration(const manifest::Manifest& m,
                                                        const manifest::Expansion& expansion) {
  std::vector<SequentialPlan> plans;
  // Cells of every unit (built only when some block is sequential).
  std::vector<std::vector<std::size_t>> unit_cells;
  for (std::size_t bi = 0; bi < m.certifications.size(); ++bi) {
    const auto& block = m.certifications[bi];
    if (!block.sequential) continue;
    const std::string where = m.file.string() + ": certification block '" + block.name + "'";
    if (block.risks.size() != 1) {
      throw InputError(where + ": sequential = true certifies one risk; risks has " +
                       std::to_string(block.risks.size()));
    }
    if (block.procedure != "fixed_sequence") {
      throw InputError(where + ": sequential = true needs procedure = \"fixed_sequence\", got \"" +
                       block.procedure + "\"");
    }
    if (block.per_task) throw InputError(where + ": sequential = true does not support per_task");
    if (unit_cells.empty()) {
      unit_cells.resize(expansion.units.size());
      for (std::size_t c = 0; c < expansion.cells.size(); ++c) {
        unit_cells.at(expansion.cells[c].unit).push_back(c);
      }
    }
    const manifest::Grid* grid = m.find_grid(block.grid);
    const manifest::MethodConfig* method_cfg = m.find_method(block.method);
    const manifest::Benchmark* bench_cfg = m.find_benchmark(block.benchmark);
    const auto protocol = parse_protocol(block.protocol);
    const auto backend = parse_attention_backend(block.backend);
    if (grid == nullptr || method_cfg == nullptr || bench_cfg == nullptr || !protocol || !backend) {
      throw InternalError(where +
                          ": names an unknown grid, method, benchmark, protocol or backend");
    }
    const auto method = static_cast<std::int16_t>(method_cfg - m.methods.data());
    const auto bench = static_cast<std::uint16_t>(bench_cfg - m.benchmarks.data());

    for (const auto& model_name : grid->models) {
      const auto model_it =
          std::find_if(m.models.begin(), m.models.end(),
                       [&](const manifest::Model& x) { return x.name == model_name; });
      const auto model = static_cast<std::uint16_t>(model_it - m.models.begin());
      SequentialPlan plan;
      plan.block = bi;
      plan.block_name = block.name;
      plan.model_name = model_name;
      plan.name = block.name + "/" + model_name;
      const bool mean_loss = block.risks.front() == "mean_loss";
      plan.risk = mean_loss ? reduce::SequentialRisk::mean_loss : reduce::SequentialRisk::violation;
      plan.tau = block.tau;
      plan.epsilon = mean_loss && block.loss_epsilon > 0 ? block.loss_epsilon : block.epsilon;
      plan.delta = block.delta;
      for (double v : block.candidates) {
        plan.candidate_ids.push_back(block.method + "@" + manifest::format_number(v));
      }
      // The calibration requests in canonical (task, instance) order.
      std::vector<std::size_t> canonical;
      for (std::size_t ui = 0; ui < expansion.units.size(); ++ui) {
        const auto& u = expansion.units[ui];
        if (u.model == model && u.benchmark == bench && u.attention_backend == *backend &&
            u.split == manifest::Split::calibration) {
          canonical.push_back(ui);
        }
      }
      std::sort(canonical.begin(), canonical.end(), [&](std::size_t a, std::size_t b) {
        const auto& ua = expansion.units[a];
        const auto& ub = expansion.units[b];
        return ua.task != ub.task ? ua.task < ub.task : ua.instance < ub.instance;
      });
      // Keyed by the block name, as reduce's replay: every model of the block shares the order.
      const auto order =
          reduce::sequential_request_order(m.study.seed, block.name, canonical.size());
      plan.candidate_cells.resize(block.candidates.size());
      for (std::size_t request : order) {
        const std::size_t ui = canonical[request];
        std::optional<std::size_t> reference;
        std::vector<std::optional<std::size_t>> cand(block.candidates.size());
        for (std::size_t c : unit_cells[ui]) {
          const auto& cell = expansion.cells[c];
          if (cell.protocol != *protocol) continue;
          if (cell.method == -1) {
            reference = c;
          } else if (cell.method == method && cell.budget_kind != manifest::BudgetKind::none) {
            for (std::size_t j = 0; j < block.candidates.size(); ++j) {
              if (cell.budget == block.candidates[j]) cand[j] = c;
            }
          }
        }
        if (!reference) {
          throw InternalError(where + ": unit " + std::to_string(expansion.units[ui].id) +
                              " has no full-KV cell under protocol " + block.protocol);
        }
        plan.units.push_back(ui);
        plan.canonical_index.push_back(request);
        plan.reference_cells.push_back(*reference);
        for (std::size_t j = 0; j < cand.size(); ++j) {
          if (!cand[j]) {
            throw InternalError(where + ": candidate " + plan.candidate_ids[j] +
                                " has no cell on unit " + std::to_string(expansion.units[ui].id));
          }
          plan.candidate_cells[j].push_back(*cand[j]);
        }
      }
      plans.push_back(std::move(plan));
    }
  }
  return plans;
}

std::vector<std::size_t> fixed_n_calibration_cells(const manifest::Manifest& m,
                                                   const manifest::Expansion& expansion) {
  // A fixed-n twin of every non-sequential block, planned like a sequential one.
  manifest::Manifest twin = m;
  bool any = false;
  for (auto& block : twin.certifications) {
    block.sequential = !block.sequential;
    any = any || block.sequential;
    // Only the cells matter: contract kinds the planner refuses do not change them.
    block.risks = {"violation"};
    block.procedure = "fixed_sequence";
    block.per_task = false;
  }
  std::vector<std::size_t> out;
  if (!any) return out;
  for (const auto& plan : plan_sequential_calibration(twin, expansion)) {
    for (const auto& cells : plan.candidate_cells)
      out.insert(out.end(), cells.begin(), cells.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CellOutcome cell_outcome(std::size_t cell, const records::CellRecord& record) {
  return CellOutcome{cell, record.status, record.score};
}

SequentialScheduler::SequentialScheduler(std::vector<SequentialPlan> plans,
                                         const manifest::Expansion& expansion,
                                         std::span<const PendingUnit> pending,
                                         std::span<const std::size_t> never_drop)
    : plans_(std::move(plans)),
      pending_cell_(expansion.cells.size(), 0),
      dropped_(expansion.cells.size(), 0),
      issued_unit_(expansion.units.size(), 0),
      outcome_(expansion.cells.size()),
      needers_(expansion.cells.size(), 0) {
  for (const auto& unit : pending) {
    for (std::size_t c : unit.cells) pending_cell_.at(c) = 1;
  }
  for (std::size_t c : never_drop) ++needers_.at(c);  // never reaches 0
  for (const auto& plan : plans_) {
    PlanState st;
    const auto n_max = static_cast<std::int64_t>(plan.units.size());
    for (std::size_t j = 0; j < plan.candidate_ids.size(); ++j) {
      if (n_max > 0) st.tests.emplace_back(plan.epsilon, plan.delta, n_max);
      for (std::size_t c : plan.candidate_cells.at(j)) ++needers_.at(c);
    }
    st.candidates.resize(plan.candidate_ids.size());
    state_.push_back(std::move(st));
  }
}

bool SequentialScheduler::any_running(std::size_t p) const {
  for (const auto& c : state_[p].candidates) {
    if (c.running()) return true;
  }
  return false;
}

bool SequentialScheduler::plan_finished(std::size_t p) const {
  return !any_running(p) || state_[p].cursor == static_cast<std::int64_t>(plans_[p].units.size());
}

bool SequentialScheduler::finished() const {
  for (std::size_t p = 0; p < plans_.size(); ++p) {
    if (!plan_finished(p)) return false;
  }
  return true;
}

bool SequentialScheduler::position_needs_run(std::size_t p, std::size_t position) const {
  const auto& plan = plans_[p];
  if (issued_unit_[plan.units[position]] != 0) return false;
  const auto needs = [&](std::size_t c) { return pending_cell_[c] != 0 && !outcome_[c]; };
  if (needs(plan.reference_cells[position])) return true;
  for (std::size_t j = 0; j < plan.candidate_ids.size(); ++j) {
    if (state_[p].candidates[j].running() && needs(plan.candidate_cells[j][position])) return true;
  }
  return false;
}

std::vector<std::size_t> SequentialScheduler::next_wave(std::size_t world_size) {
  std::vector<std::size_t> wave;
  if (plans_.empty() || world_size == 0) return wave;
  bool progressed = true;
  while (wave.size() < world_size && progressed) {
    progressed = false;
    for (std::size_t k = 0; k < plans_.size() && wave.size() < world_size; ++k) {
      const std::size_t p = (next_plan_ + k) % plans_.size();
      auto& st = state_[p];
      if (!any_running(p)) continue;
      while (st.issued < plans_[p].units.size() && !position_needs_run(p, st.issued)) ++st.issued;
      if (st.issued == plans_[p].units.size()) continue;
      const std::size_t unit = plans_[p].units[st.issued++];
      issued_unit_[unit] = 1;
      wave.push_back(unit);
      progressed = true;
    }
  }
  next_plan_ = (next_plan_ + 1) % plans_.size();
  return wave;
}

std::vector<std::size_t> SequentialScheduler::cells_to_run(
    std::span<const std::size_t> cells) const {
  std::vector<std::size_t> out;
  for (std::size_t c : cells) {
    if (dropped_.at(c) == 0) out.push_back(c);
  }
  return out;
}

void SequentialScheduler::observe(std::span<const CellOutcome> outcomes) {
  for (const auto& o : outcomes) outcome_.at(o.cell) = o;
  for (std::size_t p = 0; p < plans_.size(); ++p) advance(p);
}

void SequentialScheduler::drop_after(std::size_t p, std::size_t j, std::size_t from) {
  const auto& cells = plans_[p].candidate_cells[j];
  for (std::size_t q = from; q < cells.size(); ++q) {
    if (--needers_[cells[q]] == 0 && !outcome_[cells[q]]) dropped_[cells[q]] = 1;
  }
}

void SequentialScheduler::advance(std::size_t p) {
  const auto& plan = plans_[p];
  auto& st = state_[p];
  const std::size_t positions = plan.units.size();
  const std::size_t J = plan.candidate_ids.size();
  while (st.cursor < static_cast<std::int64_t>(positions) && any_running(p)) {
    const auto pos = static_cast<std::size_t>(st.cursor);
    const auto& reference = outcome_[plan.reference_cells[pos]];
    if (!reference) return;
    if (reference->status == records::CellStatus::excluded) {
      ++st.cursor;  // the request leaves n
      continue;
    }
    for (std::size_t j = 0; j < J; ++j) {
      if (st.candidates[j].running() && !outcome_[plan.candidate_cells[j][pos]]) return;
    }
    for (std::size_t j = 0; j < J; ++j) {
      if (!st.candidates[j].running()) continue;
      const auto& cand = *outcome_[plan.candidate_cells[j][pos]];
      const double loss =
          usable(*reference) && usable(cand)
              ? reduce::sequential_loss(plan.risk, plan.tau, reference->score, cand.score)
              : 1.0;
      st.tests[j].observe(loss);
      auto& c = st.candidates[j];
      c.decision = st.tests[j].decision();
      c.requests_used = st.tests[j].requests_used();
      c.e_value = st.tests[j].e_value();
    }
    ++st.n;
    ++st.cursor;
    // Fixed sequence: after the first candidate that cannot certify, no later one can.
    for (std::size_t j = 0; j < J; ++j) {
      if (st.candidates[j].decision != SequentialDecision::not_certifiable) continue;
      for (std::size_t later = j + 1; later < J; ++later) {
        if (st.candidates[later].running()) st.candidates[later].stopped_early = true;
      }
      break;
    }
    // Candidates that stopped at this position: their later cells are no longer needed.
    for (std::size_t j = 0; j < J; ++j) {
      auto& c = st.candidates[j];
      if (!c.running() && !c.dropped) {
        c.dropped = true;
        drop_after(p, j, static_cast<std::size_t>(st.cursor));
      }
    }
    bool chain = true;
    for (auto& c : st.candidates) {
      chain = chain && c.decision == SequentialDecision::certified;
      c.certified = chain;
    }
  }
}

std::vector<PendingUnit> SequentialScheduler::remaining(
    std::span<const PendingUnit> pending) const {
  std::vector<PendingUnit> out;
  for (const auto& unit : pending) {
    if (issued_unit_.at(unit.unit) != 0) continue;
    PendingUnit kept{unit.unit, cells_to_run(unit.cells)};
    if (!kept.cells.empty()) out.push_back(std::move(kept));
  }
  return out;
}

std::vector<std::size_t> SequentialScheduler::dropped_cells() const {
  std::vector<std::size_t> out;
  for (std::size_t c = 0; c < dropped_.size(); ++c) {
    if (dropped_[c] != 0) out.push_back(c);
  }
  return out;
}

std::string SequentialScheduler::decisions_json(std::size_t block) const {
  nlohmann::ordered_json j;
  j["block"] = "";
  j["plans"] = nlohmann::ordered_json::array();
  for (std::size_t p = 0; p < plans_.size(); ++p) {
    const auto& plan = plans_[p];
    if (plan.block != block) continue;
    j["block"] = plan.block_name;
    const auto& st = state_[p];
    nlohmann::ordered_json e;
    e["name"] = plan.name;
    e["model"] = plan.model_name;
    e["risk"] = plan.risk == reduce::SequentialRisk::violation ? "violation" : "mean_loss";
    e["tau"] = plan.tau;
    e["epsilon"] = plan.epsilon;
    e["delta"] = plan.delta;
    e["bet_cap"] = stats::kSequentialBetCap;
    e["n_max"] = plan.units.size();
    e["positions_observed"] = st.cursor;
    e["requests_observed"] = st.n;
    e["finished"] = plan_finished(p);
    std::string selected = stats::kFullKvPolicy;
    e["candidates"] = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < plan.candidate_ids.size(); ++c) {
      const auto& s = st.candidates[c];
      if (s.certified) selected = plan.candidate_ids[c];
      nlohmann::ordered_json cj;
      cj["id"] = plan.candidate_ids[c];
      cj["decision"] = stats::sequential_decision_name(s.decision);
      cj["requests_used"] = s.requests_used;
      cj["e_value"] = s.e_value;
      cj["stopped_early"] = s.stopped_early;
      cj["certified"] = s.certified;
      e["candidates"].push_back(std::move(cj));
    }
    e["selected"] = selected;
    j["plans"].push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

std::vector<std::filesystem::path> SequentialScheduler::publish_decisions(
    const std::filesystem::path& output_dir) const {
  std::vector<std::filesystem::path> written;
  std::map<std::size_t, bool> blocks;  // block → all its plans finished
  for (std::size_t p = 0; p < plans_.size(); ++p) {
    auto [it, inserted] = blocks.emplace(plans_[p].block, true);
    it->second = it->second && plan_finished(p);
  }
  for (const auto& [block, done] : blocks) {
    if (!done) continue;
    std::string name;
    for (const auto& plan : plans_) {
      if (plan.block == block) name = plan.block_name;
    }
    const auto dir = output_dir / "sequential";
    const auto target = dir / (name + ".json");
    const std::string content = decisions_json(block);
    if (std::filesystem::exists(target)) {
      std::ifstream in(target, std::ios::binary);
      std::stringstream existing;
      existing << in.rdbuf();
      if (existing.str() != content) {
        throw InputError(target.string() +
                         ": the sequential decisions recomputed from the records differ from the "
                         "published ones (were records changed or retried?)");
      }
      continue;
    }
    std::filesystem::create_directories(dir);
    write_new_file(target, content);
    written.push_back(target);
  }
  return written;
}

WaveLoopResult run_sequential_waves(SequentialScheduler& scheduler,
                                    std::span<const PendingUnit> pending, int rank, int world_size,
                                    const RunWaveUnit& run_unit, const WaveExchange& exchange,
                                    const std::function<bool()>& stop_requested) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw InternalError("run_sequential_waves: rank " + std::to_string(rank) + " of world size " +
                        std::to_string(world_size));
  }
  std::map<std::size_t, const PendingUnit*> by_unit;
  for (const auto& unit : pending) by_unit[unit.unit] = &unit;
  WaveLoopResult result;
  const auto r = static_cast<std::size_t>(rank);
  while (true) {
    const auto wave = scheduler.next_wave(static_cast<std::size_t>(world_size));
    if (wave.empty()) break;
    bool stop = stop_requested && stop_requested();
    std::vector<CellOutcome> mine;
    if (!stop && r < wave.size()) {
      const auto it = by_unit.find(wave[r]);
      if (it == by_unit.end()) {
        throw InternalError("sequential wave: unit index " + std::to_string(wave[r]) +
                            " is not pending");
      }
      const auto cells = scheduler.cells_to_run(it->second->cells);
      if (!cells.empty()) {
        const auto produced = run_unit(wave[r], cells);
        if (produced.size() != cells.size()) {
          throw InternalError("sequential wave: " + std::to_string(produced.size()) +
                              " records for " + std::to_string(cells.size()) + " cells");
        }
        for (std::size_t i = 0; i < cells.size(); ++i) {
          mine.push_back(cell_outcome(cells[i], produced[i]));
        }
        ++result.units_run;
        result.cells_run += cells.size();
      }
    }
    const auto all = exchange(wave, std::move(mine), stop);
    scheduler.observe(all);
    ++result.waves;
    if (stop) {
      // Units of this wave that were not run stay pending: the next launch resumes them.
      result.stopped = true;
      break;
    }
  }
  return result;
}

namespace {

void mpi_ok(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  throw InternalError(std::string("sequential wave exchange: ") + what +
                      " failed: " + std::string(message, static_cast<std::size_t>(length)));
}

}  // namespace

WaveExchange mpi_wave_exchange() {
  return [](std::span<const std::size_t>, std::vector<CellOutcome> mine, bool& stop) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int local_stop = stop ? 1 : 0, any_stop = 0;
    mpi_ok(MPI_Allreduce(&local_stop, &any_stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
           "MPI_Allreduce");
    stop = any_stop != 0;
    // Triples as doubles: cell index (exact below 2^53), status, score.
    std::vector<double> send;
    send.reserve(3 * mine.size());
    for (const auto& o : mine) {
      send.push_back(static_cast<double>(o.cell));
      send.push_back(static_cast<double>(static_cast<int>(o.status)));
      send.push_back(o.score);
    }
    const int count = static_cast<int>(send.size());
    std::vector<int> counts(static_cast<std::size_t>(size)),
        offsets(static_cast<std::size_t>(size));
    mpi_ok(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
           "MPI_Allgather");
    int total = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      offsets[i] = total;
      total += counts[i];
    }
    std::vector<double> received(static_cast<std::size_t>(total));
    mpi_ok(MPI_Allgatherv(send.data(), count, MPI_DOUBLE, received.data(), counts.data(),
                          offsets.data(), MPI_DOUBLE, MPI_COMM_WORLD),
           "MPI_Allgatherv");
    std::vector<CellOutcome> all;
    all.reserve(received.size() / 3);
    for (std::size_t i = 0; i + 2 < received.size(); i += 3) {
      all.push_back(CellOutcome{static_cast<std::size_t>(received[i]),
                                static_cast<records::CellStatus>(static_cast<int>(received[i + 1])),
                                received[i + 2]});
    }
    return all;
  };
}

}  // namespace kvaudit::run
