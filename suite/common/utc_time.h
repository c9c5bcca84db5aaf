// UTC timestamps in ISO 8601 with a trailing Z, e.g. "2026-11-29T13:22:58Z".
#pragma once

#include <cstdint>
#include <string>

namespace kvaudit {

std::string utc_now_iso8601();
// Nanoseconds since the Unix epoch (system clock), for record timings.
std::int64_t unix_time_ns();

}  // namespace kvaudit
