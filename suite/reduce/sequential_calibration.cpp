// Replay of a block's sequential calibration (see sequential_calibration.h).
#include "suite/reduce/sequential_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "base/errors.h"
#include "statistics/certification.h"
#include "statistics/rng.h"

namespace kvaudit::reduce {
namespace {

std::string str(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

}  // namespace

double sequential_loss(SequentialRisk risk, double tau, double full_score, double candidate_score) {
  const double drop = full_score - candidate_score;
  if (risk == SequentialRisk::violation) return drop > tau ? 1.0 : 0.0;
  return std::clamp(drop, 0.0, 1.0);
}

std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<std::size_t> sequential_request_order(std::uint64_t study_seed,
                                                  const std::string& block, std::size_t n) {
  if (n >= (std::size_t{1} << 32)) {
    throw InputError(block + ": " + std::to_string(n) +
                     " calibration requests is too many for the sequential order (< 2^32)");
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::uint64_t h = fnv1a64(block);
  const stats::PhiloxKey key = stats::philox_key(study_seed);
  const auto h_lo = static_cast<std::uint32_t>(h & 0xffffffffu);
  const auto h_hi = static_cast<std::uint32_t>(h >> 32);
  for (std::size_t i = n; i-- > 1;) {
    const auto block_words = stats::philox4x32_10(
        {static_cast<std::uint32_t>(i / 2), h_lo, h_hi, kSequentialOrderTag}, key);
    const std::uint64_t u =
        (i % 2 == 0) ? (static_cast<std::uint64_t>(block_words[1]) << 32) | block_words[0]
                     : (static_cast<std::uint64_t>(block_words[3]) << 32) | block_words[2];
    const auto j = static_cast<std::size_t>(stats::draw_index(u, i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

SequentialCalibrationResult replay_sequential_calibration(const SequentialCalibrationInput& input) {
  const std::string& where = input.block;
  if (input.candidates.empty()) throw InputError(where + ": no candidates to certify");
  if (!(input.epsilon > 0.0 && input.epsilon < 1.0)) {
    throw InputError(where + ": contract epsilon must be in (0, 1), got " + str(input.epsilon));
  }
  if (!(input.delta > 0.0 && input.delta < 1.0)) {
    throw InputError(where + ": contract delta must be in (0, 1), got " + str(input.delta));
  }
  const std::size_t planned = input.candidates.front().losses.size();
  if (planned == 0) throw InputError(where + ": no calibration requests (n = 0)");
  if (!input.excluded.empty() && input.excluded.size() != planned) {
    throw InputError(where + ": " + std::to_string(input.excluded.size()) +
                     " exclusion flags for " + std::to_string(planned) + " calibration requests");
  }
  for (const auto& c : input.candidates) {
    if (c.losses.size() != planned) {
      throw InputError(where + ": candidate '" + c.id + "' has " + std::to_string(c.losses.size()) +
                       " calibration losses, the first has " + std::to_string(planned));
    }
    if (!c.missing.empty() && c.missing.size() != planned) {
      throw InputError(where + ": candidate '" + c.id + "' has " +
                       std::to_string(c.missing.size()) + " missing flags for " +
                       std::to_string(planned) + " calibration requests");
    }
  }

  SequentialCalibrationResult result;
  result.block = input.block;
  result.n_max = static_cast<std::int64_t>(planned);
  result.order = sequential_request_order(input.seed, input.block, planned);

  const std::size_t J = input.candidates.size();
  std::vector<std::vector<double>> ordered(J);
  std::vector<std::vector<std::uint8_t>> ordered_missing(J);
  for (std::size_t request : result.order) {
    if (!input.excluded.empty() && input.excluded[request] != 0) continue;
    for (std::size_t j = 0; j < J; ++j) {
      const auto& c = input.candidates[j];
      const bool missing = !c.missing.empty() && c.missing[request] != 0;
      const double loss = missing ? 1.0 : c.losses[request];
      if (!(loss >= 0.0 && loss <= 1.0)) {
        throw InputError(where + ": candidate '" + c.id + "' calibration request " +
                         std::to_string(request) + " has loss " + str(loss) +
                         " (must be in [0, 1])");
      }
      ordered[j].push_back(loss);
      ordered_missing[j].push_back(missing ? 1 : 0);
    }
  }
  result.n = static_cast<std::int64_t>(ordered.front().size());
  result.candidate_cells_total = static_cast<std::int64_t>(J) * result.n;
  if (result.n == 0) {
    // Every request excluded: nothing observed, nothing certified.
    for (const auto& c : input.candidates) {
      SequentialCandidateReport report;
      report.id = c.id;
      result.candidates.push_back(report);
    }
    result.selected_policy = stats::kFullKvPolicy;
    return result;
  }

  const auto family =
      stats::sequential_fixed_sequence(ordered, input.epsilon, input.delta, result.n_max);
  std::int64_t most_used = 0;
  for (std::size_t j = 0; j < J; ++j) {
    const auto& r = family.candidates[j];
    SequentialCandidateReport report;
    report.id = input.candidates[j].id;
    report.decision = r.outcome.decision;
    report.requests_used = r.outcome.requests_used;
    report.e_value = r.outcome.e_value;
    report.stopped_early = r.stopped_early;
    report.certified = r.certified;
    for (std::int64_t t = 0; t < report.requests_used; ++t) {
      report.imputed += ordered_missing[j][static_cast<std::size_t>(t)];
    }
    report.cells_saved = result.n - report.requests_used;
    result.candidate_cells_saved += report.cells_saved;
    most_used = std::max(most_used, report.requests_used);
    result.candidates.push_back(std::move(report));
  }
  result.reference_cells_saved = result.n - most_used;
  result.selected = family.selected;
  result.stop_index = family.stop_index;
  result.selected_policy =
      family.selected ? input.candidates[*family.selected].id : stats::kFullKvPolicy;
  return result;
}

}  // namespace kvaudit::reduce
