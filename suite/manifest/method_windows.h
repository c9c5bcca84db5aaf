// Plan-time check of observation windows against the benchmarks a grid runs them on.
//
// A method config with an observation window (snapkv, pyramidkv, defensivekv, layer_defensivekv,
// refreekv — their typed `window`, methods/method_params.h; and wrappers whose scorer has one)
// scores from the last w queries before the compression boundary and protects those w tokens. If w
// is not smaller than a benchmark's length (RULER: the nominal context; LongBench: the prompt
// limit), no candidate is left to evict and kvpress's SnapKV asserts. Such a manifest is rejected
// at plan time, naming the method config, the benchmark and both numbers, instead of producing
// failed cells at run time. It resolves every grid's configuration exactly as the run will
// (methods::resolve_method); a configuration the parser accepted but that does not resolve is
// reported too (at the configuration, once), so a run never meets a method it cannot build.
#pragma once

#include "suite/manifest/diagnostics.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

void check_method_windows(const Manifest& manifest, Diagnostics& diag);

}  // namespace kvaudit::manifest
