// LayerCapture validation (capture_checks.h).
#include "methods/capture_checks.h"

#include <cstddef>
#include <stdexcept>

#include "base/size_cast.h"

namespace kvaudit::methods {
namespace {

[[noreturn]] void fail_capture(const LayerCapture& layer, const std::string& method,
                               const std::string& what) {
  throw std::invalid_argument(method + ": layer " + std::to_string(layer.layer) +
                              " capture: " + what);
}

}  // namespace

void check_capture_basics(const LayerCapture& layer, const std::string& method) {
  if (layer.length < 1) fail_capture(layer, method, "length must be >= 1");
  if (layer.num_kv_heads < 1 || layer.num_heads < layer.num_kv_heads ||
      layer.num_heads % layer.num_kv_heads != 0)
    fail_capture(layer, method,
                 "num_heads " + std::to_string(layer.num_heads) +
                     " is not a positive multiple of " + "num_kv_heads " +
                     std::to_string(layer.num_kv_heads));
  if (layer.head_dim < 2 || layer.head_dim % 2 != 0)
    fail_capture(layer, method, "head_dim must be even and >= 2");
  if (layer.keys.size() != to_size(layer.num_kv_heads) ||
      layer.values.size() != to_size(layer.num_kv_heads))
    fail_capture(layer, method, "keys/values must hold one span per KV head");
  const std::size_t want = to_size(layer.length) * to_size(layer.head_dim);
  for (int h = 0; h < layer.num_kv_heads; ++h)
    if (layer.keys[to_size(h)].size() != want || layer.values[to_size(h)].size() != want)
      fail_capture(layer, method,
                   "keys/values of KV head " + std::to_string(h) +
                       " must be [L=" + std::to_string(layer.length) +
                       ", d=" + std::to_string(layer.head_dim) + "]");
}

void check_window(const LayerCapture& layer, int window, const std::string& method) {
  check_capture_basics(layer, method);
  if (window < 1) fail_capture(layer, method, "window must be >= 1");
  if (window >= layer.length)
    fail_capture(layer, method,
                 "length " + std::to_string(layer.length) + " must be greater than the window " +
                     std::to_string(window) + " (kvpress asserts q_len > window_size)");
  if (layer.window_rows < window || layer.window_rows > layer.length)
    fail_capture(layer, method,
                 "window_rows " + std::to_string(layer.window_rows) + " < window " +
                     std::to_string(window) + " (or > length)");
  if (layer.window_queries.size() !=
      to_size(layer.num_heads) * to_size(layer.window_rows) * to_size(layer.head_dim))
    fail_capture(layer, method, "window_queries must be [H, window_rows, d]");
}

void check_column_sums(const LayerCapture& layer, const std::string& method) {
  check_capture_basics(layer, method);
  if (layer.column_sums.size() != to_size(layer.num_heads) * to_size(layer.length))
    fail_capture(layer, method, "column_sums must be [H, L] (was it captured?)");
}

void check_query_moments(const LayerCapture& layer, int first_row, const std::string& method) {
  check_capture_basics(layer, method);
  if (layer.moments_first_row != first_row)
    fail_capture(layer, method,
                 "query moments start at row " + std::to_string(layer.moments_first_row) +
                     " but the method drops the first " + std::to_string(first_row));
  if (layer.query_count < 1 || layer.query_count != layer.length - layer.moments_first_row)
    fail_capture(layer, method,
                 "query_count " + std::to_string(layer.query_count) +
                     " != L - moments_first_row (and "
                     "must be >= 1)");
  const std::size_t hd = to_size(layer.num_heads) * to_size(layer.head_dim);
  if (layer.query_sum.size() != hd || layer.query_outer.size() != hd * to_size(layer.head_dim))
    fail_capture(layer, method, "query_sum must be [H, d] and query_outer [H, d, d]");
  if (layer.rope_inv_freq.size() != to_size(layer.head_dim / 2))
    fail_capture(layer, method, "rope_inv_freq must be [d/2]");
}

void check_o_proj(const LayerCapture& layer, const std::string& method) {
  check_capture_basics(layer, method);
  if (layer.hidden_size < 1 || layer.o_proj.size() != to_size(layer.hidden_size) *
                                                          to_size(layer.num_heads) *
                                                          to_size(layer.head_dim))
    fail_capture(layer, method, "o_proj must be [D, H*d]");
}

int check_layers(std::span<const LayerCapture> layers, const std::string& method) {
  if (layers.empty()) throw std::invalid_argument(method + ": no layers captured");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    check_capture_basics(layers[i], method);
    if (layers[i].length != layers[0].length || layers[i].num_heads != layers[0].num_heads ||
        layers[i].num_kv_heads != layers[0].num_kv_heads ||
        layers[i].head_dim != layers[0].head_dim)
      fail_capture(layers[i], method, "length and head counts must match layer 0's");
  }
  return layers[0].length;
}

}  // namespace kvaudit::methods
