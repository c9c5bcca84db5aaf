// RULER string_match_all / string_match_part per prediction; see ruler_string_match.h.
#include "suite/benchmarks/metrics/ruler_string_match.h"

#include <algorithm>

#include "suite/benchmarks/metrics/python_text.h"
#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

// 1.0 if r.lower() in pred.lower() else 0.0, with pred already lowered.
double contains_lowered(std::u32string_view lowered_prediction, std::u32string_view reference) {
  return lowered_prediction.find(python_lower(reference)) != std::u32string_view::npos ? 1.0 : 0.0;
}

void require_references(std::span<const std::u32string> references, const char* metric) {
  if (references.empty()) {
    throw InputError(std::string("RULER ") + metric +
                     ": the request has no reference answers (the official scorer fails on an "
                     "empty 'outputs' list)");
  }
}

}  // namespace

std::u32string ruler_postprocess_prediction(std::u32string_view prediction) {
  std::u32string text(python_strip(prediction));
  for (char32_t& c : text) {
    if (c <= 0x1F) c = U'\n';
  }
  return std::u32string(python_strip(text));
}

double ruler_string_match_all(std::u32string_view processed_prediction,
                              std::span<const std::u32string> references) {
  require_references(references, "string_match_all");
  const std::u32string lowered = python_lower(processed_prediction);
  double found = 0.0;  // Python sums the 1.0/0.0 terms left to right, then divides by len(ref)
  for (const auto& reference : references) found += contains_lowered(lowered, reference);
  return found / static_cast<double>(references.size());
}

double ruler_string_match_part(std::u32string_view processed_prediction,
                               std::span<const std::u32string> references) {
  require_references(references, "string_match_part");
  const std::u32string lowered = python_lower(processed_prediction);
  double best = 0.0;
  for (const auto& reference : references) {
    best = std::max(best, contains_lowered(lowered, reference));
  }
  return best;
}

}  // namespace kvaudit::metrics
