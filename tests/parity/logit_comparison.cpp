// Metrics for comparing our tensors with HF's (see logit_comparison.h).
#include "tests/parity/logit_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "base/argmax.h"
#include "runners/unit/greedy_decoding.h"

namespace kvaudit::parity_test {

void DifferenceStats::add(std::span<const float> ours, std::span<const float> reference) {
  if (ours.size() != reference.size()) {
    throw std::invalid_argument("DifferenceStats::add: " + std::to_string(ours.size()) +
                                " values vs " + std::to_string(reference.size()) + " reference");
  }
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double difference = static_cast<double>(ours[i]) - static_cast<double>(reference[i]);
    // NaN in ours must fail every bound: std::max would drop it, so make it infinite.
    max_abs = std::isnan(difference) ? std::numeric_limits<double>::infinity()
                                     : std::max(max_abs, std::abs(difference));
    sum_squared_difference += difference * difference;
    sum_squared_reference += static_cast<double>(reference[i]) * reference[i];
  }
  count += static_cast<std::int64_t>(ours.size());
}

void DifferenceStats::merge(const DifferenceStats& other) {
  max_abs = std::max(max_abs, other.max_abs);
  sum_squared_difference += other.sum_squared_difference;
  sum_squared_reference += other.sum_squared_reference;
  count += other.count;
}

double DifferenceStats::relative_norm() const {
  if (std::isnan(sum_squared_difference)) return std::numeric_limits<double>::infinity();
  if (sum_squared_reference == 0.0) {
    return sum_squared_difference == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return std::sqrt(sum_squared_difference / sum_squared_reference);
}

std::string DifferenceStats::summary() const {
  std::ostringstream text;
  text.precision(3);
  text << "max|Δ|=" << max_abs << " ‖Δ‖/‖ref‖=" << relative_norm() << " (n=" << count << ")";
  return text.str();
}

double top_two_margin(std::span<const float> logits) {
  if (logits.size() < 2) throw std::invalid_argument("top_two_margin: fewer than two logits");
  float first = -std::numeric_limits<float>::infinity();
  float second = first;
  for (const float value : logits) {
    if (value > first) {
      second = first;
      first = value;
    } else if (value > second) {
      second = value;
    }
  }
  return static_cast<double>(first) - static_cast<double>(second);
}

void TopOneAgreement::add_row(std::span<const float> ours, std::span<const float> reference,
                              double tie_tolerance) {
  if (ours.size() != reference.size()) {
    throw std::invalid_argument("TopOneAgreement::add_row: vocabulary sizes differ");
  }
  ++rows;
  const std::int32_t our_choice = argmax_token(ours);
  const std::int32_t hf_choice = argmax_token(reference);
  const bool near_tie = top_two_margin(reference) <= tie_tolerance;
  if (near_tie) ++near_tie_rows;
  if (our_choice == hf_choice) {
    ++strict_agreements;
    return;
  }
  if (!near_tie) {
    ++decisive_disagreements;
    return;
  }
  ++near_tie_switches;
  const double shortfall = static_cast<double>(reference[static_cast<std::size_t>(hf_choice)]) -
                           static_cast<double>(reference[static_cast<std::size_t>(our_choice)]);
  if (!(shortfall <= tie_tolerance)) ++tie_violations;
}

void TopOneAgreement::merge(const TopOneAgreement& other) {
  rows += other.rows;
  strict_agreements += other.strict_agreements;
  near_tie_rows += other.near_tie_rows;
  near_tie_switches += other.near_tie_switches;
  decisive_disagreements += other.decisive_disagreements;
  tie_violations += other.tie_violations;
}

double TopOneAgreement::strict_fraction() const {
  return rows == 0 ? 0.0 : static_cast<double>(strict_agreements) / static_cast<double>(rows);
}

std::string TopOneAgreement::summary() const {
  std::ostringstream text;
  text.precision(4);
  text << "top-1 " << strict_agreements << "/" << rows << " (" << 100.0 * strict_fraction()
       << "%), near ties " << near_tie_rows << " (switched " << near_tie_switches
       << ", beyond tolerance " << tie_violations << "), decisive disagreements "
       << decisive_disagreements;
  return text.str();
}

}  // namespace kvaudit::parity_test
