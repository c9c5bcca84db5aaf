// Writing and reading the preregistration lock (see prereg.h).
#include "suite/manifest/prereg.h"

#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "suite/common/atomic_file.h"
#include "suite/common/build_info.h"
#include "suite/common/utc_time.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/instance_split.h"
#include "suite/manifest/prereg_check.h"

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
  return make_prereg(m, ex, s, fingerprint_inputs(m, nullptr));
}

json make_prereg(const Manifest& m, const Expansion& ex, const PlanSummary& s,
                 const std::vector<InputFingerprint>& inputs) {
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
  j["inputs"] = inputs_json(inputs);
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
  verify_prereg(j, path);
  return j;
}

void require_same_study(const std::filesystem::path& out_dir, const json& existing,
                        const std::string& manifest_sha256) {
  const std::string old_hash = existing.at("manifest_sha256").get<std::string>();
  if (old_hash == manifest_sha256) return;
  throw InputError((out_dir / kPreregFile).string() +
                   ": already preregisters another manifest (sha256 " + old_hash +
                   "; this manifest is " + manifest_sha256 +
                   "); a changed study needs a new study.output_dir");
}

PreregOutcome write_prereg(const std::filesystem::path& out_dir, const json& prereg) {
  const auto path = out_dir / kPreregFile;
  std::error_code ec;
  if (std::filesystem::exists(out_dir, ec) && !std::filesystem::is_directory(out_dir, ec))
    throw InputError(out_dir.string() + ": not a directory (the study's output directory must " +
                     "be a directory; nothing was written)");
  if (std::filesystem::exists(path)) {
    require_same_study(out_dir, load_prereg(out_dir), prereg["manifest_sha256"].get<std::string>());
    return PreregOutcome::already_matches;
  }
  std::filesystem::create_directories(out_dir, ec);
  if (ec)
    throw InputError(out_dir.string() + ": cannot create the output directory (" + ec.message() +
                     "); nothing was written");
  write_new_file(path, prereg.dump(2) + "\n");
  return PreregOutcome::written;
}

json require_prereg_match(const std::filesystem::path& out_dir, const std::string& manifest_file,
                          const std::string& manifest_sha256) {
  const json j = load_prereg(out_dir);
  const std::string locked = j["manifest_sha256"].get<std::string>();
  if (locked != manifest_sha256) {
    throw InputError(manifest_file + ": manifest sha256 " + manifest_sha256 +
                     " differs from the preregistration " + (out_dir / kPreregFile).string() +
                     " (" + locked + "); the study changed after it was planned");
  }
  return j;
}

}  // namespace kvaudit::manifest
