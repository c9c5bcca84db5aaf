// Metrics for comparing our tensors with HF's reference tensors.
//
//   DifferenceStats   max|ours − ref| and ‖ours − ref‖₂ / ‖ref‖₂, accumulated over any number of
//                     spans (the norms are over everything added, not averaged per span).
//   TopOneAgreement   per logit row: does our argmax (torch.argmax semantics: ties → lowest id)
//   equal
//                     HF's? A row whose HF top-1/top-2 margin is ≤ tie_tolerance is a "near tie":
//                     there a different argmax is not a disagreement as long as HF's logit of our
//                     choice is within tie_tolerance of HF's maximum (rounding noise of the size of
//                     tie_tolerance can legitimately reorder the two). tie_tolerance comes from an
//                     independent noise measurement (HF's own eager-vs-sdpa max|Δ|), never from our
//                     result, so the check cannot pass vacuously.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kvaudit::parity_test {

struct DifferenceStats {
  double max_abs = 0.0;
  double sum_squared_difference = 0.0;
  double sum_squared_reference = 0.0;
  std::int64_t count = 0;

  // Adds element-wise differences; the spans must have the same size.
  void add(std::span<const float> ours, std::span<const float> reference);
  void merge(const DifferenceStats& other);
  // ‖ours − ref‖ / ‖ref‖ (0 when both are zero).
  double relative_norm() const;
  std::string summary() const;  // "max|Δ|=… ‖Δ‖/‖ref‖=… (n=…)"
};

struct TopOneAgreement {
  std::int64_t rows = 0;
  std::int64_t strict_agreements = 0;       // our argmax == HF argmax
  std::int64_t near_tie_rows = 0;           // HF margin ≤ tie_tolerance
  std::int64_t near_tie_switches = 0;       // near-tie rows where we chose the other candidate
  std::int64_t decisive_disagreements = 0;  // argmax differs although HF's margin > tolerance
  std::int64_t tie_violations = 0;          // near-tie switches to a logit further than tolerance

  // One row of logits each, same vocabulary size.
  void add_row(std::span<const float> ours, std::span<const float> reference, double tie_tolerance);
  void merge(const TopOneAgreement& other);
  double strict_fraction() const;
  // No decisive disagreement and every near-tie switch stays within the tolerance.
  bool tie_aware_agreement() const { return decisive_disagreements == 0 && tie_violations == 0; }
  std::string summary() const;
};

// HF's top-1/top-2 margin of one row.
double top_two_margin(std::span<const float> logits);

}  // namespace kvaudit::parity_test
