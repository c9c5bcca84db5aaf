// Owned LayerCapture data for the method unit tests: fill the vectors, then call view().
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/layer_capture.h"
#include "methods/method.h"

namespace kvaudit::methods::testing {

struct OwnedLayer {
  int layer = 0, num_layers = 1, num_heads = 1, num_kv_heads = 1, head_dim = 2, hidden_size = 1;
  int length = 0;
  bool bf16 = false;
  std::vector<std::vector<float>> keys, values;  // per KV head [L, d]
  int window_rows = 0;
  std::vector<float> window_queries;  // [H, window_rows, d]
  std::vector<float> column_sums;     // [H, L]
  int moments_first_row = 4;
  std::int64_t query_count = 0;
  std::vector<double> query_sum, query_outer;
  std::vector<float> o_proj, rope_inv_freq;

  LayerCapture view() const {
    LayerCapture c;
    c.layer = layer;
    c.num_layers = num_layers;
    c.num_heads = num_heads;
    c.num_kv_heads = num_kv_heads;
    c.head_dim = head_dim;
    c.hidden_size = hidden_size;
    c.length = length;
    c.model_is_bf16 = bf16;
    for (const auto& k : keys) c.keys.emplace_back(k);
    for (const auto& v : values) c.values.emplace_back(v);
    c.window_rows = window_rows;
    c.window_queries = window_queries;
    c.column_sums = column_sums;
    c.moments_first_row = moments_first_row;
    c.query_count = query_count;
    c.query_sum = query_sum;
    c.query_outer = query_outer;
    c.o_proj = o_proj;
    c.rope_inv_freq = rope_inv_freq;
    return c;
  }
};

// Keys/values of `heads` KV heads with L rows of d zeros.
inline OwnedLayer zero_layer(int heads, int query_heads, int length, int head_dim) {
  OwnedLayer o;
  o.num_kv_heads = heads;
  o.num_heads = query_heads;
  o.length = length;
  o.head_dim = head_dim;
  const auto n = static_cast<std::size_t>(length) * static_cast<std::size_t>(head_dim);
  o.keys.assign(static_cast<std::size_t>(heads), std::vector<float>(n, 0.0f));
  o.values.assign(static_cast<std::size_t>(heads), std::vector<float>(n, 0.0f));
  return o;
}

// Scores from a table [Hkv, L], the same for every layer (a gtest assertion checks the size).
class FixedScorer : public Scorer {
 public:
  explicit FixedScorer(std::vector<float> table) : table_(std::move(table)) {}
  void score(const LayerCapture&, const SelectionContext&, std::span<float> out) const override {
    ASSERT_EQ(out.size(), table_.size());
    std::copy(table_.begin(), table_.end(), out.begin());
  }
  std::string name() const override { return "fixed"; }

 private:
  std::vector<float> table_;
};

// The KVzip / KVgrad reconstruction toy: H = 2 query heads sharing Hkv = 1 KV head, d = 1 (so
// q·k/√d = q·k), D = 2. Cached keys k = (0, ln 2, ln 3) → exp = 1, 2, 3; values v = (1, 2, 1);
// o_proj [D = 2, H·d = 2] = [[3, 0], [4, 1]] → ‖W_O^{(0)}‖ = 5, ‖W_O^{(1)}‖ = 1.
inline OwnedLayer reconstruction_toy_layer(bool bf16 = false) {
  OwnedLayer o = zero_layer(1, 2, 3, 1);
  o.hidden_size = 2;
  o.bf16 = bf16;
  o.keys[0] = {0.0f, std::log(2.0f), std::log(3.0f)};
  o.values[0] = {1.0f, 2.0f, 1.0f};
  o.o_proj = {3.0f, 0.0f, 4.0f, 1.0f};
  return o;
}

// One layer of an extra pass's chunk (PassLayerView), owned: token-major rows.
struct PassRows {
  std::vector<float> queries, keys, values, input;  // [T, H, d], [T, Hkv, d], [T, Hkv, d], [T, D]
  PassLayerView view(int layer = 0) const {
    PassLayerView v;
    v.layer = layer;
    v.num_tokens = static_cast<int>(keys.size());
    v.queries = queries;
    v.keys = keys;
    v.values = values;
    v.attention_input = input;
    return v;
  }
};

// An ExtraPassResult of the given shape with every score 0.
inline ExtraPassResult empty_pass_result(int layers, int heads, int length) {
  ExtraPassResult r;
  r.num_layers = layers;
  r.num_kv_heads = heads;
  r.length = length;
  r.scores.assign(static_cast<std::size_t>(layers * heads * length), 0.0f);
  return r;
}

}  // namespace kvaudit::methods::testing
