// Loading a study for reduction: the preregistration lock (<results>/prereg.json), the manifest it
// locks (the lock's manifest_path, or the one the user names), the checks of lock_check.h, the
// expansion of the manifest into the expected units and cells, and the records of every published
// shard under <results>/shards/ (each must carry the locked manifest hash).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/shard_reader.h"
#include "suite/reduce/lock_check.h"

namespace kvaudit::reduce {

struct LoadOptions {
  std::filesystem::path results_dir;
  // The manifest to reduce with; default: the lock's manifest_path.
  std::optional<std::filesystem::path> manifest_file;
  // Also use the flushed records of unpublished (.h5.tmp) shards for cells no published shard has.
  bool salvage = false;
  // Use the digest-verified records of published shards that fail their checksum
  // (records::StudyReadOptions::salvage_corrupt) instead of refusing the study.
  bool salvage_corrupt = false;
};

struct LoadedStudy {
  std::filesystem::path results_dir;
  std::filesystem::path lock_file;
  std::filesystem::path manifest_file;
  nlohmann::json lock;
  manifest::Manifest manifest;
  std::string manifest_sha256;
  manifest::Expansion expansion;
  std::vector<LockedFamily> families;
  records::StudyRecords records;
};

// Throws InputError (exit 1) for a missing or malformed lock, a manifest whose hash differs from
// the lock, a lock whose contracts, splits or families differ from the manifest, a missing
// shards/ directory, or a malformed shard.
LoadedStudy load_study(const LoadOptions& options);

}  // namespace kvaudit::reduce
