// The fixed budgets of the list wrappers (per_layer_compression, composed): kvpress's
// PerLayerCompressionPress and ComposedPress have no settable compression ratio — their ratio
// lists are the budget, and the press reports one derived ratio:
//   per_layer_compression: mean_ℓ r_ℓ                (PerLayerCompressionPress.compression_ratio)
//   composed:              1 − Π_i (1 − r_i)        (ComposedPress.forward_hook)
// A cell of such a method must ask for exactly that compression ratio (|cell − fixed| ≤ 1e−9); the
// manifest checks every grid ratio at plan time (MethodSpec::fixed_compression), select() again.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::methods {

inline constexpr double kFixedCompressionTolerance = 1e-9;

// Python's sum(ratios) / len(ratios), in order.
double mean_compression(const std::vector<double>& ratios);
// 1 − Π (1 − r_i), multiplied in order as ComposedPress does.
double composed_compression(const std::vector<double>& ratios);

// Throws std::invalid_argument naming `method` when `cell` is not `fixed` (within the tolerance).
void check_fixed_compression(const std::string& method, double fixed, double cell);

}  // namespace kvaudit::methods
