// Test helper: a LayerCapture whose spans point into vectors this object owns, with helpers that
// make attention rows hand-computable. With head_dim d = 4 (√d = 2), a window query 2·e_c and keys
// whose component c is ln(a_j) give logits q·k_j/√d = ln(a_j), so softmax over the visible keys is
// a_j / Σ_visible a: every attention value in the tests is a ratio of small integers.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "methods/layer_capture.h"

namespace kvaudit::methods::testing {

class CaptureBuilder {
 public:
  CaptureBuilder(int num_heads, int num_kv_heads, int head_dim, int length, int window_rows,
                 int hidden_size)
      : num_heads_(num_heads),
        num_kv_heads_(num_kv_heads),
        head_dim_(head_dim),
        length_(length),
        window_rows_(window_rows),
        hidden_size_(hidden_size),
        keys_(idx(num_kv_heads), std::vector<float>(idx(length) * idx(head_dim), 0.0f)),
        values_(idx(num_kv_heads), std::vector<float>(idx(length) * idx(head_dim), 1.0f)),
        window_queries_(idx(num_heads) * idx(window_rows) * idx(head_dim), 0.0f),
        column_sums_(idx(num_heads) * idx(length), 0.0f),
        o_proj_(idx(hidden_size) * idx(num_heads) * idx(head_dim), 1.0f),
        rope_inv_freq_(idx(head_dim / 2), 1.0f) {}

  // Key component `c` of KV head `kv` = ln(weights[j]) for every position j.
  void set_key_weights(int kv, int c, const std::vector<double>& weights) {
    for (std::size_t j = 0; j < weights.size(); ++j)
      keys_[idx(kv)][j * idx(head_dim_) + idx(c)] = static_cast<float>(std::log(weights[j]));
  }
  // Window row `row` (0 = oldest of the captured rows) of query head h = 2·e_c.
  void set_query_component(int h, int row, int c) {
    float* q = window_queries_.data() + (idx(h) * idx(window_rows_) + idx(row)) * idx(head_dim_);
    for (int i = 0; i < head_dim_; ++i) q[i] = 0.0f;
    q[c] = 2.0f;
  }
  void set_value(int kv, int j, int c, float v) {
    values_[idx(kv)][idx(j) * idx(head_dim_) + idx(c)] = v;
  }
  void set_o_proj(int out, int in, float v) {
    o_proj_[idx(out) * idx(num_heads_) * idx(head_dim_) + idx(in)] = v;
  }
  std::vector<float>& values(int kv) { return values_[idx(kv)]; }
  std::vector<float>& o_proj() { return o_proj_; }
  std::vector<float>& column_sums() { return column_sums_; }

  LayerCapture view(int layer = 0, int num_layers = 1) const {
    LayerCapture c;
    c.layer = layer;
    c.num_layers = num_layers;
    c.num_heads = num_heads_;
    c.num_kv_heads = num_kv_heads_;
    c.head_dim = head_dim_;
    c.hidden_size = hidden_size_;
    c.length = length_;
    for (const auto& k : keys_) c.keys.emplace_back(k);
    for (const auto& v : values_) c.values.emplace_back(v);
    c.window_rows = window_rows_;
    c.window_queries = window_queries_;
    c.column_sums = column_sums_;
    c.o_proj = o_proj_;
    c.rope_inv_freq = rope_inv_freq_;
    return c;
  }

 private:
  static std::size_t idx(int v) { return static_cast<std::size_t>(v); }

  int num_heads_, num_kv_heads_, head_dim_, length_, window_rows_, hidden_size_;
  std::vector<std::vector<float>> keys_, values_;
  std::vector<float> window_queries_, column_sums_, o_proj_, rope_inv_freq_;
};

}  // namespace kvaudit::methods::testing
