// Validation of the LayerCaptures a method receives: every field a method reads is checked against
// the shapes it claims, so a malformed capture is an std::invalid_argument naming the method, the
// layer and the field, never an out-of-bounds read.
#pragma once

#include <span>
#include <string>

#include "methods/layer_capture.h"

namespace kvaudit::methods {

// Shapes of keys, values and the head counts; L ≥ 1.
void check_capture_basics(const LayerCapture& layer, const std::string& method);
// Additionally: at least `window` window rows (window ≤ window_rows) and window < L.
void check_window(const LayerCapture& layer, int window, const std::string& method);
void check_column_sums(const LayerCapture& layer, const std::string& method);
void check_query_moments(const LayerCapture& layer, int first_row, const std::string& method);
void check_o_proj(const LayerCapture& layer, const std::string& method);
// All layers share L and head counts; returns L (0 if `layers` is empty → throws).
int check_layers(std::span<const LayerCapture> layers, const std::string& method);

}  // namespace kvaudit::methods
