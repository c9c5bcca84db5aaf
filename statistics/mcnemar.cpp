// Exact McNemar test: binomial tails with p = 1/2 on the discordant pairs (see mcnemar.h).
#include "statistics/mcnemar.h"

#include <algorithm>
#include <string>

#include "base/errors.h"
#include "statistics/binomial.h"

namespace kvaudit::stats {

McNemarResult exact_mcnemar(std::int64_t a_only, std::int64_t b_only) {
  if (a_only < 0 || b_only < 0) {
    throw InputError("exact_mcnemar: discordant counts must be >= 0, got a_only = " +
                     std::to_string(a_only) + ", b_only = " + std::to_string(b_only));
  }
  McNemarResult result;
  result.a_only = a_only;
  result.b_only = b_only;
  const std::int64_t discordant = a_only + b_only;
  if (discordant == 0) return result;
  result.p_greater = binomial_upper_tail(discordant, 0.5, a_only);
  result.p_less = binomial_cdf(discordant, 0.5, a_only);
  result.p_two_sided = std::min(1.0, 2.0 * binomial_cdf(discordant, 0.5, std::min(a_only, b_only)));
  return result;
}

McNemarResult exact_mcnemar(const std::vector<std::uint8_t>& a,
                            const std::vector<std::uint8_t>& b) {
  if (a.size() != b.size()) {
    throw InputError("exact_mcnemar: arms differ in length (" + std::to_string(a.size()) + " vs " +
                     std::to_string(b.size()) + ")");
  }
  std::int64_t a_only = 0;
  std::int64_t b_only = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] > 1 || b[i] > 1) {
      throw InputError("exact_mcnemar: outcome of pair " + std::to_string(i) + " is not 0 or 1");
    }
    a_only += (a[i] == 1 && b[i] == 0) ? 1 : 0;
    b_only += (a[i] == 0 && b[i] == 1) ? 1 : 0;
  }
  McNemarResult result = exact_mcnemar(a_only, b_only);
  result.pairs = static_cast<std::int64_t>(a.size());
  return result;
}

}  // namespace kvaudit::stats
