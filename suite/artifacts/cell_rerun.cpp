// `kvaudit verify --rerun` (see cell_rerun.h).
#include "suite/artifacts/cell_rerun.h"

#include <algorithm>
#include <bit>
#include <random>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "runners/cpu/cpu_isa.h"
#include "suite/common/sha256.h"
#include "suite/manifest/input_fingerprints.h"
#include "suite/records/provenance.h"
#include "suite/run/unit_executor.h"

namespace kvaudit::artifacts {
namespace {

bool same_score(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b) || (a != a && b != b);
}

}  // namespace

RerunSummary rerun_cells(const reduce::LoadedStudy& study, const RerunOptions& options,
                         std::ostream& out) {
  std::vector<const records::CellRecord*> ok;
  for (const auto& r : study.records.records) {
    if (r.status == records::CellStatus::ok) ok.push_back(&r);
  }
  std::sort(ok.begin(), ok.end(), [](auto* a, auto* b) { return a->cell_id < b->cell_id; });
  if (options.cells < 1 || static_cast<std::size_t>(options.cells) > ok.size()) {
    throw InputError("--rerun " + std::to_string(options.cells) + ": must be between 1 and the " +
                     std::to_string(ok.size()) + " ok records of the bundle");
  }
  std::mt19937_64 rng(options.seed);
  for (std::size_t i = 0; i + 1 < ok.size() && i < static_cast<std::size_t>(options.cells); ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng() % (ok.size() - i));
    std::swap(ok[i], ok[j]);
  }
  ok.resize(static_cast<std::size_t>(options.cells));

  // The manifest with the evaluator's model files; each must be the locked one.
  manifest::Manifest m = study.manifest;
  const auto& cells = study.expansion.cells;
  std::map<std::uint64_t, const manifest::Cell*> cell_of;
  std::set<std::uint16_t> needed_models;
  for (const auto* r : ok) {
    const auto it =
        std::lower_bound(cells.begin(), cells.end(), r->cell_id,
                         [](const manifest::Cell& c, std::uint64_t v) { return c.id < v; });
    if (it == cells.end() || it->id != r->cell_id) {
      throw InputError("record of cell " + id_hex(r->cell_id) +
                       " is not a cell of the bundled manifest");
    }
    cell_of[r->cell_id] = &*it;
    needed_models.insert(study.expansion.units[it->unit].model);
  }
  for (const auto& [name, path] : options.models) {
    // An init-capture: clang before 16 cannot capture a structured binding.
    const auto it =
        std::find_if(m.models.begin(), m.models.end(),
                     [&wanted = name](const manifest::Model& x) { return x.name == wanted; });
    if (it == m.models.end()) {
      throw InputError("--model " + name + "=…: the manifest has no model called '" + name + "'");
    }
    it->path = std::filesystem::absolute(path).string();
  }
  for (const std::uint16_t model : needed_models) {
    if (!options.models.contains(m.models[model].name)) {
      throw InputError("--rerun: give the weights of model '" + m.models[model].name +
                       "' with --model " + m.models[model].name +
                       "=PATH (the bundle carries no model files)");
    }
  }
  {
    std::ostringstream notes;
    manifest::require_same_inputs(study.lock, study.lock_file, m, manifest::AbsentInput::note,
                                  "nothing was re-run", notes);
  }
  out << "re-run: " << ok.size() << " cells chosen with seed " << options.seed
      << " (std::mt19937_64, Fisher–Yates over the ok records by cell id), on the CPU backend\n";

  // The recorded device and CPU kernels per (attempt, rank): the shard that wrote the record.
  std::map<std::pair<int, int>, const records::ShardProvenance*> shard_of;
  for (const auto& shard : study.records.published) {
    shard_of[{shard.provenance.attempt, shard.provenance.rank}] = &shard.provenance;
  }
  const std::string cpu_now = records::cpu_model_name();
  const std::string core_now = cpu::cpu_kernel_provenance();

  // By unit, in cell-id order within each.
  std::map<std::uint32_t, std::vector<const records::CellRecord*>> by_unit;
  for (const auto* r : ok) by_unit[cell_of.at(r->cell_id)->unit].push_back(r);
  run::UnitExecutor executor(m, study.expansion, run::UnitExecutorOptions{});
  RerunSummary sum;
  sum.chosen = options.cells;
  for (const auto& [unit_index, recorded] : by_unit) {
    const manifest::Unit& unit = study.expansion.units[unit_index];
    // Each cell once (a reuse cell's chosen records may be several of its questions); its records
    // again matched by (cell, question).
    std::vector<const manifest::Cell*> cells_now;
    for (const auto* r : recorded) {
      const manifest::Cell* cell = cell_of.at(r->cell_id);
      if (std::find(cells_now.begin(), cells_now.end(), cell) == cells_now.end()) {
        cells_now.push_back(cell);
      }
    }
    const std::vector<records::CellRecord> now = executor.execute(unit, cells_now);
    for (std::size_t k = 0; k < recorded.size(); ++k) {
      const records::CellRecord& a = *recorded[k];
      const auto again = std::find_if(now.begin(), now.end(), [&](const records::CellRecord& r) {
        return r.cell_id == a.cell_id && r.question == a.question;
      });
      if (again == now.end()) {
        throw InternalError("re-run: no record of cell " + std::to_string(a.cell_id) +
                            " question " + std::to_string(a.question) + " came back");
      }
      const records::CellRecord& b = *again;
      std::vector<std::string> what;
      if (b.status != records::CellStatus::ok) what.push_back("status " + b.error);
      if (a.output != b.output) what.emplace_back("output");
      if (!same_score(a.score, b.score)) what.emplace_back("score");
      if (a.prompt_digest != 0 && a.prompt_digest != b.prompt_digest) what.emplace_back("prompt");
      if (a.kept_digest != 0 && a.kept_digest != b.kept_digest) what.emplace_back("kept set");
      if (what.empty()) {
        ++sum.identical;
        continue;
      }
      ++sum.different;
      const auto found = shard_of.find({a.attempt, a.rank});
      const records::ShardProvenance* p = found != shard_of.end() ? found->second : nullptr;
      const std::string gpu = p != nullptr ? p->gpu_name : "";
      const bool bf16 = m.models[unit.model].dtype == "bf16";
      const bool recorded_cuda = !gpu.empty() && bf16;
      const std::string core = p != nullptr ? p->blas_core : "";
      const std::string cpu = p != nullptr ? p->cpu_model : "";
      out << "  cell " << id_hex(a.cell_id) << " (" << a.method << ", " << a.task << " #"
          << a.instance << ", " << attention_backend_name(a.attention_backend) << "): differs in";
      for (const auto& w : what) out << " " << w;
      out << "; recorded on " << (recorded_cuda ? "cuda (" + gpu + ")" : std::string("cpu"))
          << " with " << attention_backend_name(a.attention_backend) << ", re-run on cpu with "
          << attention_backend_name(unit.attention_backend);
      if (recorded_cuda) {
        ++sum.different_device;
        out << ": the device differs (GPU and CPU numerics are not bit-identical)\n";
      } else if (core.empty()) {
        out << ": same device and backend; the record does not say which CPU kernels it used "
               "(records schema < 4)\n";
      } else if (!cpu::same_evaluation_order(core)) {
        ++sum.different_device;
        out << ": the CPU kernels differ (recorded: " << cpu << ", OpenBLAS core " << core
            << ", whose summation order depends on the machine; now: " << cpu_now << ", "
            << core_now << " — summation order changes greedy ties)\n";
      } else {
        out << ": same device and backend, and both runs used the canonical CPU evaluation order ("
            << core << " then, " << core_now
            << " now; the level does not change bits) — a real "
               "discrepancy\n";
      }
    }
  }
  out << "re-run: " << sum.identical << " of " << sum.chosen
      << " cells reproduced exactly (output, score, prompt and kept digests)";
  if (sum.different > 0) {
    out << "; " << sum.different << " differ (" << sum.different_device
        << " recorded on another device)";
  }
  out << "\n";
  return sum;
}

}  // namespace kvaudit::artifacts
