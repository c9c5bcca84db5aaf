#include "suite/manifest/prereg.h"

#include <fstream>
#include <sstream>

#include "suite/common/atomic_file.h"
#include "suite/common/build_info.h"
#include "base/errors.h"
#include "suite/common/utc_time.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/instance_split.h"

namespace kvaudit::manifest {
namespace {

using nlohmann::json;

json splits_json(const Manifest& m) {
  json out = json::object();
  for (const auto& c : m.certifications) {
    const Benchmark* b = m.find_benchmark(c.benchmark);
    if (out.contains(b->name)) continue;
    json per_task = json::object();
    for (const auto& task : b->tasks) {
      const auto split =
          split_instances(m.study.seed, b->name, task, b->instances, c.calibration, c.test);
      json cal = json::array(), test = json::array();
      for (std::size_t i = 0; i < split.size(); ++i) {
        if (split[i] == Split::calibration) cal.push_back(i);
        if (split[i] == Split::test) test.push_back(i);
      }
      per_task[task] = json{{"calibration", cal}, {"test", test}};
    }
    out[b->name] = per_task;
  }
  return out;
}

}  // namespace

json make_prereg(const Manifest& m, const Expansion& ex, const PlanSummary& s) {
  const BuildInfo& bi = build_info();
  json j;
  j["kvaudit_prereg_schema"] = kPreregSchema;
  j["study"] = m.study.name;
  j["manifest_sha256"] = s.manifest_sha256;
  j["manifest_path"] = std::filesystem::absolute(m.file).lexically_normal().string();
  j["canonical_manifest"] = canonical_json(m);
  json contracts = json::array();
  for (const auto& c : m.certifications) {
    json contract = canonical_certification(c);
    contract["models"] = m.find_grid(c.grid)->models;  // certified separately for each
    contracts.push_back(contract);
  }
  j["contracts"] = contracts;
  j["splits"] = splits_json(m);
  j["counts"] = summary_json(ex, s);
  j["tool"] = json{{"name", "kvaudit"},           {"version", bi.version},
                   {"git_commit", bi.git_commit}, {"git_dirty", bi.git_dirty},
                   {"build_type", bi.build_type}, {"compiler", bi.compiler}};
  j["created_utc"] = utc_now_iso8601();
  return j;
}

json load_prereg(const std::filesystem::path& out_dir) {
  const auto path = out_dir / kPreregFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path.string() +
                     ": no preregistration here; run `kvaudit plan MANIFEST` first");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw InputError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("manifest_sha256") || !j["manifest_sha256"].is_string() ||
      !j.contains("kvaudit_prereg_schema") || !j["kvaudit_prereg_schema"].is_number_integer()) {
    throw InputError(path.string() +
                     ": not a kvaudit preregistration (manifest_sha256 or kvaudit_prereg_schema "
                     "missing)");
  }
  if (j["kvaudit_prereg_schema"].get<int>() != kPreregSchema) {
    throw InputError(path.string() + ": preregistration schema " +
                     std::to_string(j["kvaudit_prereg_schema"].get<int>()) +
                     " is not supported by this kvaudit (expects " + std::to_string(kPreregSchema) +
                     ")");
  }
  return j;
}

PreregOutcome write_prereg(const std::filesystem::path& out_dir, const json& prereg) {
  const auto path = out_dir / kPreregFile;
  if (std::filesystem::exists(path)) {
    const json old = load_prereg(out_dir);
    const std::string old_hash = old["manifest_sha256"].get<std::string>();
    const std::string new_hash = prereg["manifest_sha256"].get<std::string>();
    if (old_hash == new_hash) return PreregOutcome::already_matches;
    throw InputError(path.string() + ": already preregisters another manifest (sha256 " + old_hash +
                     "; this manifest is " + new_hash +
                     "); a changed study needs a new study.output_dir");
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw InternalError("cannot create " + out_dir.string() + ": " + ec.message());
  write_new_file(path, prereg.dump(2) + "\n");
  return PreregOutcome::written;
}

void require_prereg_match(const std::filesystem::path& out_dir, const std::string& manifest_file,
                          const std::string& manifest_sha256) {
  const json j = load_prereg(out_dir);
  const std::string locked = j["manifest_sha256"].get<std::string>();
  if (locked != manifest_sha256) {
    throw InputError(manifest_file + ": manifest sha256 " + manifest_sha256 +
                     " differs from the preregistration " + (out_dir / kPreregFile).string() +
                     " (" + locked + "); the study changed after it was planned");
  }
}

}  // namespace kvaudit::manifest
