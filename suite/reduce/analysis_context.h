// What every analysis reads: the study frame, partner lookups, the preregistered families, the
// family-wise α and the bootstrap settings; plus names for dimension codes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "suite/reduce/cell_lookup.h"
#include "suite/reduce/lock_check.h"
#include "suite/reduce/paired_rows.h"
#include "suite/reduce/study_frame.h"

namespace kvaudit::reduce {

// Indices into manifest::kProtocolNames and manifest::kAttentionBackendNames (both sorted by name).
inline constexpr std::uint8_t kQueryAgnostic = 0;
inline constexpr std::uint8_t kQueryAware = 1;
inline constexpr std::uint8_t kEager = 0;
inline constexpr std::uint8_t kSdpa = 1;

struct AnalysisContext {
  const StudyFrame& frame;
  const CellLookup& lookup;
  const std::vector<LockedFamily>& families;
  double alpha = 0.05;
  BootstrapSettings bootstrap;
  std::vector<std::int64_t> task_sizes;  // instances per task, by global task id

  AnalysisContext(const StudyFrame& f, const CellLookup& l, const std::vector<LockedFamily>& fams,
                  double family_alpha, BootstrapSettings settings);

  // The name of a dimension code (dim_code's inverse): model/benchmark/method names, backend and
  // protocol names, "benchmark/task", budget labels.
  std::string label(Dim d, std::int64_t code) const;
};

}  // namespace kvaudit::reduce
