// The preregistration lock: <output_dir>/prereg.json, written by `kvaudit plan` before any result
// exists. It holds the manifest's SHA-256 and canonical form, the certification contracts, the
// calibration/test splits, the counts, the tool version and git commit, and the UTC time. It is
// never replaced by a different study: a manifest with another hash needs a new output dir.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/manifest/plan_summary.h"

namespace kvaudit::manifest {

inline constexpr int kPreregSchema = 1;
inline constexpr const char* kPreregFile = "prereg.json";

nlohmann::json make_prereg(const Manifest& m, const Expansion& ex, const PlanSummary& s);

enum class PreregOutcome { written, already_matches };

// Writes <out_dir>/prereg.json (creating out_dir). If one exists with the same manifest hash,
// leaves it untouched and returns already_matches; with a different hash throws InputError.
PreregOutcome write_prereg(const std::filesystem::path& out_dir, const nlohmann::json& prereg);

// Reads and checks the shape of <out_dir>/prereg.json; InputError naming the file otherwise.
nlohmann::json load_prereg(const std::filesystem::path& out_dir);

// InputError unless <out_dir>/prereg.json exists and locks `manifest_sha256`.
void require_prereg_match(const std::filesystem::path& out_dir, const std::string& manifest_file,
                          const std::string& manifest_sha256);

}  // namespace kvaudit::manifest
