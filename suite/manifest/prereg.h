// The preregistration lock: <output_dir>/prereg.json, written by `kvaudit plan` before any result
// exists. It holds the manifest's SHA-256 and canonical form, the certification contracts, the
// calibration/test splits, the counts, the tool version and git commit, the UTC time and (schema
// 2) the fingerprints of every model and data file the study reads (input_fingerprints.h). It is
// never replaced by a different study: a manifest with another hash needs a new output dir. Every
// read of a lock verifies it whole (prereg_check.h).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "suite/manifest/expansion.h"
#include "suite/manifest/input_fingerprints.h"
#include "suite/manifest/manifest.h"
#include "suite/manifest/plan_summary.h"

namespace kvaudit::manifest {

// 2: + "inputs" (the fingerprints of the models and data). Schema-1 locks are still read.
inline constexpr int kPreregSchema = 2;
inline constexpr const char* kPreregFile = "prereg.json";

nlohmann::json make_prereg(const Manifest& m, const Expansion& ex, const PlanSummary& s,
                           const std::vector<InputFingerprint>& inputs);
// The same, fingerprinting the manifest's inputs itself (fingerprint_inputs, no progress).
nlohmann::json make_prereg(const Manifest& m, const Expansion& ex, const PlanSummary& s);

enum class PreregOutcome { written, already_matches };

// Writes <out_dir>/prereg.json (creating out_dir). If one exists with the same manifest hash,
// leaves it untouched and returns already_matches; with a different hash, or when out_dir is not a
// directory (or cannot be created), throws InputError naming the path.
PreregOutcome write_prereg(const std::filesystem::path& out_dir, const nlohmann::json& prereg);

// InputError unless the existing (verified) lock `existing` at <out_dir>/prereg.json locks
// `manifest_sha256`: a changed study needs a new output directory.
void require_same_study(const std::filesystem::path& out_dir, const nlohmann::json& existing,
                        const std::string& manifest_sha256);

// Reads <out_dir>/prereg.json and verifies it whole (verify_prereg); InputError naming the file
// and the field otherwise.
nlohmann::json load_prereg(const std::filesystem::path& out_dir);

// The verified lock; InputError unless <out_dir>/prereg.json exists and locks `manifest_sha256`.
nlohmann::json require_prereg_match(const std::filesystem::path& out_dir,
                                    const std::string& manifest_file,
                                    const std::string& manifest_sha256);

}  // namespace kvaudit::manifest
