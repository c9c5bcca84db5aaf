// Test helper: a LayerCapture whose spans point into vectors this object owns, with helpers that
// make attention rows hand-computable. With head_dim d = 4 (√d = 2), a window query 2·e_c and keys
// whose component c is ln(a_j) give logits q·k_j/√d = ln(a_j), so softmax over the visible keys is
// a_j / Σ_visible a: every attention value in the tests is a ratio of small integers.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "methods/layer_capture.h"
#include "tests/methods/test_capture.h"

namespace kvaudit::methods::testing {

class CaptureBuilder {
 public:
  CaptureBuilder(int num_heads, int num_kv_heads, int head_dim, int length, int window_rows,
                 int hidden_size) {
    OwnedLayer& o = layer_;
    o.num_heads = num_heads;
    o.num_kv_heads = num_kv_heads;
    o.head_dim = head_dim;
    o.length = length;
    o.window_rows = window_rows;
    o.hidden_size = hidden_size;
    o.keys.assign(idx(num_kv_heads), std::vector<float>(idx(length) * idx(head_dim), 0.0f));
    o.values.assign(idx(num_kv_heads), std::vector<float>(idx(length) * idx(head_dim), 1.0f));
    o.window_queries.assign(idx(num_heads) * idx(window_rows) * idx(head_dim), 0.0f);
    o.column_sums.assign(idx(num_heads) * idx(length), 0.0f);
    o.o_proj.assign(idx(hidden_size) * idx(num_heads) * idx(head_dim), 1.0f);
    o.rope_inv_freq.assign(idx(head_dim / 2), 1.0f);
  }

  // Key component `c` of KV head `kv` = ln(weights[j]) for every position j.
  void set_key_weights(int kv, int c, const std::vector<double>& weights) {
    for (std::size_t j = 0; j < weights.size(); ++j)
      layer_.keys[idx(kv)][j * idx(layer_.head_dim) + idx(c)] =
          static_cast<float>(std::log(weights[j]));
  }
  // Window row `row` (0 = oldest of the captured rows) of query head h = 2·e_c.
  void set_query_component(int h, int row, int c) {
    float* q = layer_.window_queries.data() +
               (idx(h) * idx(layer_.window_rows) + idx(row)) * idx(layer_.head_dim);
    for (int i = 0; i < layer_.head_dim; ++i) q[i] = 0.0f;
    q[c] = 2.0f;
  }
  void set_value(int kv, int j, int c, float v) {
    layer_.values[idx(kv)][idx(j) * idx(layer_.head_dim) + idx(c)] = v;
  }
  void set_o_proj(int out, int in, float v) {
    layer_.o_proj[idx(out) * idx(layer_.num_heads) * idx(layer_.head_dim) + idx(in)] = v;
  }
  std::vector<float>& values(int kv) { return layer_.values[idx(kv)]; }
  std::vector<float>& o_proj() { return layer_.o_proj; }
  std::vector<float>& column_sums() { return layer_.column_sums; }

  // The view (spans into this builder) as layer `layer` of `num_layers`.
  LayerCapture view(int layer = 0, int num_layers = 1) const {
    LayerCapture c = layer_.view();
    c.layer = layer;
    c.num_layers = num_layers;
    return c;
  }

 private:
  static std::size_t idx(int v) { return static_cast<std::size_t>(v); }

  OwnedLayer layer_;  // tests/methods/test_capture.h
};

}  // namespace kvaudit::methods::testing
