// Checks of the preregistration lock against the manifest reduce was given (see lock_check.h).
#include "suite/reduce/lock_check.h"

#include <map>
#include <set>

#include "base/errors.h"
#include "statistics/certification.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/input_fingerprints.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::reduce {
namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::filesystem::path& lock_file, const std::string& what) {
  throw InputError(lock_file.string() + ": " + what);
}

const json& member(const json& j, const char* key, const std::filesystem::path& lock_file,
                   const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    refuse(lock_file, where + ": field '" + key + "' is missing");
  return j.at(key);
}

double number_at(const json& j, const char* key, const std::filesystem::path& lock_file,
                 const std::string& where) {
  const json& v = member(j, key, lock_file, where);
  if (!v.is_number()) refuse(lock_file, where + "." + key + ": not a number");
  return v.get<double>();
}

std::vector<std::string> candidate_texts(const json& list, const std::filesystem::path& lock_file,
                                         const std::string& where) {
  if (!list.is_array()) refuse(lock_file, where + ".candidates: not an array");
  std::vector<std::string> out;
  for (const auto& v : list) {
    if (!v.is_number()) refuse(lock_file, where + ".candidates: an entry is not a number");
    out.push_back(manifest::format_number(v.get<double>()));
  }
  return out;
}

}  // namespace

void require_same_manifest(const json& lock, const std::filesystem::path& lock_file,
                           const std::filesystem::path& manifest_file,
                           const std::string& manifest_sha256) {
  const std::string locked = member(lock, "manifest_sha256", lock_file, "lock").get<std::string>();
  if (locked == manifest_sha256) return;
  throw InputError(manifest_file.string() + ": manifest sha256 " + manifest_sha256 +
                   " differs from the preregistration lock " + lock_file.string() + " (" + locked +
                   "); the manifest changed after the study was planned. Reduce with the manifest "
                   "the study was planned with (--manifest FILE), or plan the changed manifest "
                   "into a new output directory and run it there. Nothing was written.");
}

void require_same_contracts(const json& lock, const std::filesystem::path& lock_file,
                            const manifest::Manifest& m) {
  const json& contracts = member(lock, "contracts", lock_file, "lock");
  if (!contracts.is_array()) refuse(lock_file, "contracts: not an array");
  std::map<std::string, const json*> by_name;
  for (const auto& c : contracts) {
    const json& name = member(c, "name", lock_file, "contracts[]");
    if (!name.is_string()) refuse(lock_file, "contracts[].name: not a string");
    by_name[name.get<std::string>()] = &c;
  }
  std::set<std::string> seen;
  for (const auto& block : m.certifications) {
    const std::string where = "contracts[" + block.name + "]";
    const auto it = by_name.find(block.name);
    if (it == by_name.end())
      refuse(lock_file, "certification block '" + block.name +
                            "' has no preregistered contract; refusing to certify it");
    seen.insert(block.name);
    const json& locked = *it->second;
    const stats::Contract used{block.tau, block.epsilon, block.delta};
    const stats::Contract prereg{number_at(locked, "tau", lock_file, where),
                                 number_at(locked, "epsilon", lock_file, where),
                                 number_at(locked, "delta", lock_file, where)};
    std::vector<std::string> used_candidates;
    for (double v : block.candidates) used_candidates.push_back(manifest::format_number(v));
    const auto prereg_candidates =
        candidate_texts(member(locked, "candidates", lock_file, where), lock_file, where);
    stats::require_matches_lock(used, prereg, used_candidates, prereg_candidates,
                                lock_file.string() + ": " + where);
    // Every other field of the contract (split sizes, method, benchmark, protocol, backend, grid)
    // and the models it is certified for.
    json expected = manifest::canonical_certification(block);
    expected["models"] = m.find_grid(block.grid)->models;
    for (const auto& [key, value] : expected.items()) {
      const json& got = member(locked, key.c_str(), lock_file, where);
      if (key == "tau" || key == "epsilon" || key == "delta" || key == "candidates") continue;
      if (got != value)
        refuse(lock_file, where + "." + key + ": the lock has " + got.dump() +
                              ", the manifest implies " + value.dump() +
                              "; refusing to certify under a contract that differs from the "
                              "preregistration");
    }
    // A contract-kind field the lock has and the manifest's block does not (e.g. a locked
    // per_task = true that the manifest dropped) changes the contract too.
    for (const auto& [key, value] : locked.items()) {
      if (!expected.contains(key))
        refuse(lock_file, where + "." + key + ": the lock has " + value.dump() +
                              ", the manifest's block does not set it; refusing to certify under "
                              "a contract that differs from the preregistration");
    }
  }
  for (const auto& [name, c] : by_name) {
    if (!seen.count(name))
      refuse(lock_file, "contracts[" + name +
                            "]: preregistered, but the manifest has no such certification block");
  }
}

void require_same_splits(const json& lock, const std::filesystem::path& lock_file,
                         const manifest::Manifest& m, const manifest::Expansion& ex) {
  if (m.certifications.empty()) return;
  const json& splits = member(lock, "splits", lock_file, "lock");
  // benchmark index -> task index -> (calibration instances, test instances), from the units.
  std::map<std::pair<std::size_t, std::size_t>,
           std::pair<std::set<std::int64_t>, std::set<std::int64_t>>>
      from_units;
  for (const auto& u : ex.units) {
    if (u.split == manifest::Split::none) continue;
    auto& entry = from_units[{u.benchmark, u.task}];
    (u.split == manifest::Split::calibration ? entry.first : entry.second).insert(u.instance);
  }
  std::set<std::string> benchmarks_with_blocks;
  for (const auto& c : m.certifications) benchmarks_with_blocks.insert(c.benchmark);
  for (std::size_t bi = 0; bi < m.benchmarks.size(); ++bi) {
    const auto& b = m.benchmarks[bi];
    if (!benchmarks_with_blocks.count(b.name)) continue;
    const json& per_task = member(splits, b.name.c_str(), lock_file, "splits");
    for (std::size_t ti = 0; ti < b.tasks.size(); ++ti) {
      const std::string where = "splits." + b.name + "." + b.tasks[ti];
      const json& t = member(per_task, b.tasks[ti].c_str(), lock_file, "splits." + b.name);
      const auto it = from_units.find({bi, ti});
      const std::set<std::int64_t> none;
      const auto& want_cal = it == from_units.end() ? none : it->second.first;
      const auto& want_test = it == from_units.end() ? none : it->second.second;
      for (const char* part : {"calibration", "test"}) {
        const json& list = member(t, part, lock_file, where);
        if (!list.is_array()) refuse(lock_file, where + "." + part + ": not an array");
        std::set<std::int64_t> got;
        for (const auto& v : list) {
          if (!v.is_number_integer()) refuse(lock_file, where + "." + part + ": not an integer");
          got.insert(v.get<std::int64_t>());
        }
        const auto& want = std::string(part) == "calibration" ? want_cal : want_test;
        // Units exist only for backends/models in grids; an empty unit set means "not expanded".
        if (!want.empty() && got != want)
          refuse(lock_file, where + "." + part +
                                ": differs from the split the manifest's seed implies; the "
                                "preregistered split was changed, refusing to certify");
      }
    }
  }
}

void require_same_inputs(const json& lock, const std::filesystem::path& lock_file,
                         const manifest::Manifest& m, std::ostream& notes) {
  manifest::require_same_inputs(lock, lock_file, m, manifest::AbsentInput::note,
                                "nothing was written", notes);
}

std::vector<LockedFamily> locked_families(const json& lock, const std::filesystem::path& lock_file,
                                          const manifest::Manifest& m) {
  const json& counts = member(lock, "counts", lock_file, "lock");
  const json& fams = member(counts, "bonferroni_families", lock_file, "counts");
  if (!fams.is_array()) refuse(lock_file, "counts.bonferroni_families: not an array");
  std::vector<LockedFamily> out;
  for (const auto& f : fams) {
    const std::string where = "counts.bonferroni_families[]";
    LockedFamily lf;
    const json& name = member(f, "name", lock_file, where);
    const json& analysis = member(f, "analysis", lock_file, where);
    const json& over = member(f, "over", lock_file, where);
    const json& size = member(f, "m", lock_file, where);
    if (!name.is_string() || !analysis.is_string() || !over.is_array() ||
        !size.is_number_integer() || size.get<std::int64_t>() < 0)
      refuse(lock_file, where + ": name, analysis, over or m has the wrong type");
    lf.name = name.get<std::string>();
    lf.analysis = analysis.get<std::string>();
    for (const auto& d : over) {
      if (!d.is_string()) refuse(lock_file, where + ".over: not a string");
      lf.over.push_back(d.get<std::string>());
    }
    lf.m = size.get<std::int64_t>();
    lf.alpha = m.statistics.alpha;
    if (f.contains("alpha") && f["alpha"].is_number()) lf.alpha = f["alpha"].get<double>();
    out.push_back(lf);
  }
  // The lock must declare exactly the manifest's families.
  for (const auto& decl : m.statistics.families) {
    bool found = false;
    for (const auto& lf : out) {
      if (lf.name != decl.name) continue;
      found = true;
      if (lf.analysis != decl.analysis || lf.over != decl.over)
        refuse(lock_file, "counts.bonferroni_families[" + decl.name +
                              "]: analysis or dimensions differ from the manifest's declaration");
    }
    if (!found)
      refuse(lock_file, "counts.bonferroni_families: the manifest's family '" + decl.name +
                            "' is not in the lock");
  }
  if (out.size() != m.statistics.families.size())
    refuse(lock_file, "counts.bonferroni_families: the lock declares " +
                          std::to_string(out.size()) + " families, the manifest " +
                          std::to_string(m.statistics.families.size()));
  return out;
}

}  // namespace kvaudit::reduce
