// Argument checks shared by the statistics functions: an InputError naming the function, the
// argument and the value (printed with %.17g, so the message shows the exact double).
#pragma once

#include <cstdio>
#include <string>

#include "base/errors.h"

namespace kvaudit::stats {

// v with 17 significant digits (reads back to the same double).
inline std::string exact_text(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

// v in the open interval (0, 1) (ε, δ, α), else InputError "function: name must be in (0, 1), got
// v".
inline void require_open_unit(double v, const char* name, const char* function) {
  if (!(v > 0.0 && v < 1.0)) {
    throw InputError(std::string(function) + ": " + name + " must be in (0, 1), got " +
                     exact_text(v));
  }
}

// p in [0, 1], else InputError "function: name must be in [0, 1], got p".
inline void require_probability(double p, const char* name, const char* function) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw InputError(std::string(function) + ": " + name + " must be in [0, 1], got " +
                     exact_text(p));
  }
}

}  // namespace kvaudit::stats
