// Loading a study for reduction (see study_loader.h).
#include "suite/reduce/study_loader.h"

#include "base/errors.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/prereg.h"

namespace kvaudit::reduce {

LoadedStudy load_study(const LoadOptions& options) {
  LoadedStudy s;
  s.results_dir = std::filesystem::absolute(options.results_dir).lexically_normal();
  s.lock_file = s.results_dir / manifest::kPreregFile;
  s.lock = manifest::load_prereg(s.results_dir);
  if (options.manifest_file) {
    s.manifest_file = *options.manifest_file;
  } else {
    if (!s.lock.contains("manifest_path") || !s.lock["manifest_path"].is_string())
      throw InputError(s.lock_file.string() +
                       ": manifest_path is missing; name the manifest with --manifest FILE");
    s.manifest_file = s.lock["manifest_path"].get<std::string>();
    if (!std::filesystem::exists(s.manifest_file))
      throw InputError(s.lock_file.string() + ": manifest_path " + s.manifest_file.string() +
                       " does not exist (was the study moved?); name the manifest with "
                       "--manifest FILE");
  }
  s.manifest = manifest::load_manifest(s.manifest_file);
  s.manifest_sha256 = manifest::manifest_sha256(s.manifest);
  require_same_manifest(s.lock, s.lock_file, s.manifest_file, s.manifest_sha256);
  require_same_contracts(s.lock, s.lock_file, s.manifest);
  s.families = locked_families(s.lock, s.lock_file, s.manifest);
  s.expansion = manifest::expand(s.manifest);
  require_same_splits(s.lock, s.lock_file, s.manifest, s.expansion);

  const auto shards = s.results_dir / "shards";
  if (!std::filesystem::is_directory(shards))
    throw InputError(shards.string() +
                     ": no shards directory; nothing has been run for this study yet (kvaudit run "
                     "writes the shards there)");
  records::StudyReadOptions read_options;
  read_options.expected_manifest_sha256 = s.manifest_sha256;
  read_options.salvage = options.salvage;
  read_options.salvage_corrupt = options.salvage_corrupt;
  s.records = records::read_study(shards, read_options);
  return s;
}

}  // namespace kvaudit::reduce
