// --seed values: a Philox key written as a non-negative decimal integer. Boost.Program_options
// parses "-1" into a std::uint64_t by wrapping it to 2^64 − 1, so seed options are declared as
// strings and read here; a negative, signed, non-numeric or out-of-range value is an InputError
// naming the option (the manifest likewise refuses negative seeds).
#pragma once

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "base/errors.h"

namespace kvaudit::cli {

// The seed `text` given to `option` (e.g. "--seed"): digits only, in [0, 2^64 − 1].
inline std::uint64_t parse_seed_option(const std::string& text, const std::string& option) {
  std::uint64_t value = 0;
  const char* const first = text.data();
  const char* const last = first + text.size();
  const auto [end, error] = std::from_chars(first, last, value);
  const bool digits_only =
      !text.empty() && std::isdigit(static_cast<unsigned char>(text.front())) != 0;
  if (!digits_only || error != std::errc{} || end != last) {
    const bool negative = !text.empty() && text.front() == '-';
    throw InputError(
        option + " '" + text + "': " +
        (negative ? std::string("a seed must not be negative") : std::string("not a seed")) +
        " (expected an integer in [0, 18446744073709551615])");
  }
  return value;
}

}  // namespace kvaudit::cli
