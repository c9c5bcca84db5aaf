// The preregistration lock as reduce reads it (the lock itself is verified whole when it is loaded,
// manifest/prereg_check.h): the manifest must be the one the lock was written for (same canonical
// SHA-256), the lock's certification contracts, calibration/test splits and Bonferroni family sizes
// must be what that manifest implies, and the models and data files that are present must be the
// ones the lock fingerprinted. Any difference is refused (kvaudit::InputError naming the lock, the
// field or file and both values): reduce never certifies or corrects over anything but the
// preregistered contract and families, nor over records of a swapped model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::reduce {

// A Bonferroni family as the lock declares it.
struct LockedFamily {
  std::string name;
  std::string analysis;           // accuracy | protocol_gap | baseline_wins | ...
  std::vector<std::string> over;  // dimension names
  std::int64_t m = 0;
  double alpha = 0.05;
};

// InputError unless `manifest_sha256` equals the lock's hash. The message names both hashes, the
// lock file and what to do (reduce with the manifest the study was planned with, or plan the
// changed manifest into a new output directory).
void require_same_manifest(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                           const std::filesystem::path& manifest_file,
                           const std::string& manifest_sha256);

// Refuses (InputError) when a certification block of the manifest has no contract in the lock or
// one that differs (τ, ε, δ, candidate order, split sizes, method, benchmark, protocol, backend,
// models), or when the lock has a contract the manifest lacks.
void require_same_contracts(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                            const manifest::Manifest& m);

// Refuses (InputError) when the lock's calibration/test split of a (benchmark, task) differs from
// the split the expansion assigns to the units.
void require_same_splits(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                         const manifest::Manifest& m, const manifest::Expansion& ex);

// Refuses (InputError naming the file, the locked and the current fingerprint) when a model or
// data file the lock fingerprinted is present and differs, or when a file the study reads now was
// not fingerprinted. A file that is absent (a study reduced on a machine without its models: reduce
// reads only records) is noted in `notes` and skipped; so is a schema-1 lock without fingerprints.
void require_same_inputs(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                         const manifest::Manifest& m, std::ostream& notes);

// The lock's Bonferroni families (counts.bonferroni_families); InputError naming the lock when the
// entry is malformed or when a family differs from the manifest's declaration.
std::vector<LockedFamily> locked_families(const nlohmann::json& lock,
                                          const std::filesystem::path& lock_file,
                                          const manifest::Manifest& m);

}  // namespace kvaudit::reduce
