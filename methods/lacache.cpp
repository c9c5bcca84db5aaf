// LaCacheMethod (lacache.h): the official ladder arithmetic with Python's integer semantics.
#include "methods/lacache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "methods/capture_checks.h"

namespace kvaudit::methods {
namespace {

// Python's a // b and a % b on integers (floor division; the remainder has the divisor's sign).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
std::int64_t python_mod(std::int64_t a, std::int64_t b) { return a - b * floor_div(a, b); }
// math.ceil(a / b) for integers (exact).
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// Python's list(range(first, last)) appended to `out` (empty when last <= first).
void append_range(std::vector<std::int64_t>& out, std::int64_t first, std::int64_t last) {
  for (std::int64_t q = first; q < last; ++q) out.push_back(q);
}

}  // namespace

std::vector<std::int32_t> lacache_layer_positions(std::int64_t length, int num_layers,
                                                  std::int64_t cache_size, int layer,
                                                  const LaCacheParams& params) {
  const std::int64_t L = length;
  const std::int64_t N = num_layers;
  const std::int64_t s = params.span;
  const std::int64_t o = params.overlap;
  if (s < 1 || o < 0 || o >= s)
    throw std::invalid_argument("lacache: needs span >= 1 and 0 <= overlap < span");
  std::vector<std::int32_t> kept;
  if (L <= cache_size) {  // the official call returns the cache unchanged
    for (std::int64_t j = 0; j < L; ++j) kept.push_back(static_cast<std::int32_t>(j));
    return kept;
  }
  const std::string where = " (L = " + std::to_string(L) + ", layers = " + std::to_string(N) +
                            ", n_kept = " + std::to_string(cache_size) +
                            ", span = " + std::to_string(s) + ", overlap = " + std::to_string(o) +
                            "; the official LaCache raises here too)";
  auto undefined = [&](const std::string& what) {
    throw std::invalid_argument("lacache: " + what + where);
  };
  const std::int64_t start = std::min<std::int64_t>(
      {params.max_start_size, std::max<std::int64_t>(1, L - (N + 1)), cache_size - (N + 1)});
  const std::int64_t before = 1 + ceil_div(N - s, s - o);
  const std::int64_t after = std::min(ceil_div(s, s - o), before);
  const std::int64_t reducible = before - after;
  if (reducible == 0)
    undefined("a ladder step removes no position (span and overlap need more layers)");
  const std::int64_t C = cache_size + floor_div(reducible, 2);  // the official compensation
  const std::int64_t to_remove = L - C;
  const std::int64_t cursor = start;
  const std::int64_t room = C - cursor - N;
  const std::int64_t fits = floor_div(room, after) * reducible;
  const bool startover = to_remove > fits;
  const std::int64_t increment = startover ? room : ceil_div(to_remove, reducible) * after;
  const std::int64_t steps = floor_div(increment, after);

  std::vector<std::int64_t> ladder;  // the official ladder_index of this layer
  append_range(ladder, 0, cursor);
  const std::int64_t shift = python_mod(layer, reducible + 1);
  for (std::int64_t j = 0; j < steps; ++j)
    for (std::int64_t k = 0; k < after; ++k) ladder.push_back(cursor + shift + before * j + k);
  append_range(ladder, cursor + before * steps, L);

  if (startover) {
    const std::int64_t within = floor_div(C - start - N, after) * reducible;
    if (within == 0) undefined("no position can be removed within one startover");
    const std::int64_t remaining = to_remove - fits;
    const std::int64_t times = ceil_div(remaining, within);
    const std::int64_t before_t = before + (times - 1) * (before - 1);
    const std::int64_t reducible_t = before_t - after;
    if (reducible_t == 0 || reducible_t + 1 == 0)
      undefined("a startover ladder step removes no position");
    const std::int64_t steps_t = floor_div(ceil_div(remaining, reducible_t) * after, after);
    const auto n = static_cast<std::int64_t>(ladder.size());
    std::vector<std::int64_t> selected;
    append_range(selected, 0, start);
    const std::int64_t shift_t = python_mod(layer, reducible_t + 1);
    for (std::int64_t j = 0; j < steps_t; ++j)
      for (std::int64_t k = 0; k < after; ++k)
        selected.push_back(start + shift_t + before_t * j + times * k);
    append_range(selected, start + before_t * steps_t, n);
    std::vector<std::int64_t> compacted;
    compacted.reserve(selected.size());
    for (std::int64_t q : selected) {
      if (q < 0) q += n;  // Python indexing counts a negative index from the end
      if (q < 0 || q >= n) undefined("the startover selects past the laddered positions");
      compacted.push_back(ladder[static_cast<std::size_t>(q)]);
    }
    ladder = std::move(compacted);
  }
  for (const std::int64_t p : ladder) {
    if (p < 0 || p >= L) undefined("a laddered position falls outside [0, L)");
    kept.push_back(static_cast<std::int32_t>(p));
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  if (kept.empty()) undefined("no position is kept");
  return kept;
}

LaCacheMethod::LaCacheMethod(LaCacheParams params) : params_(params) {
  if (params_.span < 1 || params_.overlap < 0 || params_.overlap >= params_.span)
    throw std::invalid_argument("lacache: needs span >= 1 and 0 <= overlap < span");
  if (params_.max_start_size < 1)
    throw std::invalid_argument("lacache: max_start_size must be >= 1");
}

Selection LaCacheMethod::select(std::span<const LayerCapture> layers, const Budget& budget,
                                const SelectionContext&) const {
  const int L = check_layers(layers, name());
  const std::int64_t n = kept_count(L, budget.compression);
  const auto num_layers = static_cast<int>(layers.size());
  Selection out;
  out.kept.resize(layers.size());
  for (int l = 0; l < num_layers; ++l) {
    const auto& layer = layers[static_cast<std::size_t>(l)];
    out.kept[static_cast<std::size_t>(l)].assign(
        static_cast<std::size_t>(layer.num_kv_heads),
        lacache_layer_positions(L, num_layers, n, l, params_));
  }
  return out;
}

}  // namespace kvaudit::methods
