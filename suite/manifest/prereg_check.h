// Verification of a preregistration lock as a whole, shared by plan (an existing lock), run and
// reduce (docs/MANIFEST.md §The lock): every field the lock must have, with its type
// (kvaudit_prereg_schema, study, manifest_sha256, manifest_path, canonical_manifest, contracts,
// splits, counts, tool, created_utc, and from schema 2 on the input fingerprints), and the
// canonical manifest hashing (SHA-256 of its compact canonical text, canonical.h) to the lock's
// manifest_sha256. A lock edited by hand fails here, naming the file and the field.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kvaudit::manifest {

// The schemas this kvaudit reads: 1 (no input fingerprints) and 2.
inline constexpr int kOldestPreregSchema = 1;

// InputError "<lock_file>: <field>: <what is wrong>" for the first violation.
void verify_prereg(const nlohmann::json& lock, const std::filesystem::path& lock_file);

}  // namespace kvaudit::manifest
