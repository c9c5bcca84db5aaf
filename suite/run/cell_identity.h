// The identity fields of a cell's record (ids, model, benchmark, task, method, digest, backend,
// protocol, split, budget, instance, nominal length), filled from the manifest exactly as the
// reducer checks them (suite/reduce/study_frame.cpp). The rank loop uses it for cells whose unit
// failed as a whole (status oom/error), so that a failure record is still matched to its cell.
#pragma once

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"
#include "suite/records/cell_record.h"

namespace kvaudit::run {

// A record of `cell` (of `unit`) with every identity field set and every measurement left at its
// "not measured" value (0 counts, NaN doubles, empty output); status ok, error "".
records::CellRecord cell_identity_record(const manifest::Manifest& manifest,
                                         const manifest::Unit& unit, const manifest::Cell& cell);

}  // namespace kvaudit::run
