// Test-local eviction methods; see test_methods.h.
#include "tests/unit_runner/test_methods.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <stdexcept>

namespace kvaudit::unit::testing {
namespace {

using methods::Budget;
using methods::LayerCapture;
using methods::Method;
using methods::Selection;
using methods::SelectionContext;
using Kept = std::vector<std::vector<std::vector<std::int32_t>>>;

std::int64_t n_kept(std::int64_t length, double compression) {
  const double kept = std::floor(static_cast<double>(length) * (1.0 - compression));
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(kept));
}

std::size_t sz(int n) { return static_cast<std::size_t>(n); }

double layer_score(TestScore kind, const LayerCapture& c, int g, int j) {
  const std::size_t d = sz(c.head_dim), L = sz(c.length);
  const float* key = c.keys[sz(g)].data() + sz(j) * d;
  double score = 0.0;
  switch (kind) {
    case TestScore::key_norm:
      for (std::size_t e = 0; e < d; ++e) score -= static_cast<double>(key[e]) * key[e];
      return score;
    case TestScore::window_attention: {
      const int w = std::min(8, c.window_rows);
      for (int h = g * c.group_size(); h < (g + 1) * c.group_size(); ++h)
        for (int r = c.window_rows - w; r < c.window_rows; ++r) {
          const float* q = c.window_queries.data() + (sz(h) * sz(c.window_rows) + sz(r)) * d;
          for (std::size_t e = 0; e < d; ++e) score += static_cast<double>(q[e]) * key[e];
        }
      return score;
    }
    case TestScore::column_sums:
      for (int h = g * c.group_size(); h < (g + 1) * c.group_size(); ++h)
        score += static_cast<double>(c.column_sums[sz(h) * L + sz(j)]);
      return score / static_cast<double>(c.length - j);
    case TestScore::query_moments:
      for (int h = g * c.group_size(); h < (g + 1) * c.group_size(); ++h)
        for (std::size_t e = 0; e < d; ++e) score += c.query_sum[sz(h) * d + e] * key[e];
      return score;
  }
  return score;
}

class TopKMethod : public Method {
 public:
  TopKMethod(TestScore kind, bool layer_wide) : kind_(kind), layer_wide_(layer_wide) {}

  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext&) const override {
    Selection selection;
    for (const LayerCapture& c : layers) {
      if (kind_ == TestScore::window_attention && c.window_rows < 1)
        throw std::invalid_argument(name() + ": no window rows");
      const int L = c.length;
      const std::int64_t per_head = n_kept(L, budget.compression);
      // (score, kv_head, position) over the layer, best first, ties to lower head/position.
      struct Entry {
        double score;
        int head, position;
      };
      std::vector<Entry> entries;
      for (int g = 0; g < c.num_kv_heads; ++g)
        for (int j = 0; j < L; ++j) entries.push_back({layer_score(kind_, c, g, j), g, j});
      auto better = [](const Entry& a, const Entry& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.head != b.head) return a.head < b.head;
        return a.position < b.position;
      };
      std::vector<std::vector<std::int32_t>> kept(sz(c.num_kv_heads));
      if (layer_wide_) {
        std::sort(entries.begin(), entries.end(), better);
        const std::size_t take = sz(static_cast<int>(per_head)) * sz(c.num_kv_heads);
        for (std::size_t i = 0; i < take && i < entries.size(); ++i)
          kept[sz(entries[i].head)].push_back(entries[i].position);
      } else {
        for (int g = 0; g < c.num_kv_heads; ++g) {
          std::vector<Entry> head(entries.begin() + g * L, entries.begin() + (g + 1) * L);
          std::sort(head.begin(), head.end(), better);
          for (std::int64_t i = 0; i < per_head; ++i)
            kept[sz(g)].push_back(head[static_cast<std::size_t>(i)].position);
        }
      }
      for (auto& k : kept) std::sort(k.begin(), k.end());
      selection.kept.push_back(std::move(kept));
    }
    return selection;
  }
  int window_needed() const override { return kind_ == TestScore::window_attention ? 8 : 0; }
  bool needs_column_sums() const override { return kind_ == TestScore::column_sums; }
  bool needs_query_moments() const override { return kind_ == TestScore::query_moments; }
  std::string name() const override {
    static const char* names[] = {"test_key_norm", "test_window_attention", "test_column_sums",
                                  "test_query_moments"};
    return std::string(names[static_cast<int>(kind_)]) + (layer_wide_ ? "_layer_wide" : "");
  }

 private:
  TestScore kind_;
  bool layer_wide_;
};

class KeepAlternate : public Method {
 public:
  Selection select(std::span<const LayerCapture> layers, const Budget&,
                   const SelectionContext&) const override {
    Selection selection;
    for (const LayerCapture& c : layers) {
      std::vector<std::vector<std::int32_t>> kept(sz(c.num_kv_heads));
      for (int g = 0; g < c.num_kv_heads; ++g)
        for (int j = 0; j < c.length; ++j)
          if ((j + c.layer + g) % 2 == 0) kept[sz(g)].push_back(j);
      selection.kept.push_back(std::move(kept));
    }
    return selection;
  }
  std::string name() const override { return "test_keep_alternate"; }
};

class KeepAll : public Method {
 public:
  Selection select(std::span<const LayerCapture> layers, const Budget&,
                   const SelectionContext&) const override {
    Selection selection;
    for (const LayerCapture& c : layers) {
      std::vector<std::int32_t> all(sz(c.length));
      std::iota(all.begin(), all.end(), 0);
      selection.kept.emplace_back(sz(c.num_kv_heads), all);
    }
    return selection;
  }
  std::string name() const override { return "test_keep_all"; }
};

class Throwing : public Method {
 public:
  Selection select(std::span<const LayerCapture>, const Budget&,
                   const SelectionContext&) const override {
    throw std::invalid_argument("this test method always refuses");
  }
  std::string name() const override { return "test_throwing"; }
};

class OutOfRange : public Method {
 public:
  Selection select(std::span<const LayerCapture> layers, const Budget&,
                   const SelectionContext&) const override {
    Selection selection = KeepAll().select(layers, {}, {});
    selection.kept[0][0] = {0, layers[0].length};
    return selection;
  }
  std::string name() const override { return "test_out_of_range"; }
};

}  // namespace

std::unique_ptr<Method> make_top_k_method(TestScore score, bool layer_wide) {
  return std::make_unique<TopKMethod>(score, layer_wide);
}
std::unique_ptr<Method> make_keep_alternate_method() { return std::make_unique<KeepAlternate>(); }
std::unique_ptr<Method> make_keep_all_method() { return std::make_unique<KeepAll>(); }
std::unique_ptr<Method> make_throwing_method() { return std::make_unique<Throwing>(); }
std::unique_ptr<Method> make_out_of_range_method() { return std::make_unique<OutOfRange>(); }

}  // namespace kvaudit::unit::testing
