// CAM cache merging (kvpress 0.5.5 CAMPress); see cam_merging.h.
#include "runners/unit/cam_merging.h"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "base/size_cast.h"
#include "methods/bf16_rounding.h"
#include "methods/top_k.h"

namespace kvaudit::unit {
float cam_uniform(std::uint64_t seed, std::uint64_t cell_key, int layer, int decode_step,
                  std::int64_t e) {
  if (layer < 0 || layer >= (1 << 15) || e < 0 || e >= (std::int64_t{1} << 18) || decode_step < 0)
    throw std::invalid_argument("cam: merge draw " + std::to_string(e) + " of layer " +
                                std::to_string(layer) +
                                " is outside the Philox stream (2^18 draws per compression, "
                                "layers < 2^15)");
  r123::Philox4x32 philox;
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(seed & 0xffffffffu), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(decode_step),
       0x80000000u | (static_cast<std::uint32_t>(layer) << 16) | static_cast<std::uint32_t>(e / 4),
       static_cast<std::uint32_t>(cell_key & 0xffffffffu),
       static_cast<std::uint32_t>(cell_key >> 32)}};
  const auto block = philox(counter, key);
  return static_cast<float>(block[static_cast<std::size_t>(e % 4)] >> 8) * 0x1p-24f;
}

std::vector<float> cam_step_attention(std::span<const float> queries_rotated,
                                      std::span<const CacheHeadEntries> heads, int num_heads,
                                      int head_dim, bool bf16) {
  const int hkv = static_cast<int>(heads.size());
  if (hkv == 0 || num_heads % hkv != 0 ||
      queries_rotated.size() != to_size(num_heads) * to_size(head_dim))
    throw std::invalid_argument("cam: malformed step attention input");
  const std::size_t n = heads.front().positions.size();
  const int group = num_heads / hkv;
  const auto root = static_cast<float>(std::sqrt(static_cast<double>(head_dim)));
  std::vector<float> out(to_size(hkv) * n, 0.0f);
  std::vector<float> row(n);
  for (int g = 0; g < hkv; ++g) {
    const CacheHeadEntries& e = heads[to_size(g)];
    if (e.positions.size() != n || e.keys.size() != n * to_size(head_dim))
      throw std::invalid_argument("cam: KV heads hold different numbers of entries");
    float* o = out.data() + to_size(g) * n;
    for (int r = 0; r < group; ++r) {
      const float* q = queries_rotated.data() + to_size(g * group + r) * to_size(head_dim);
      float max = -INFINITY;
      for (std::size_t j = 0; j < n; ++j) {
        const float* k = e.keys.data() + j * to_size(head_dim);
        double dot = 0.0;
        for (int i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * k[i];
        // matmul in the model dtype (f32 accumulation, rounded), then ÷ √d rounded again.
        row[j] =
            methods::maybe_bf16(methods::maybe_bf16(static_cast<float>(dot), bf16) / root, bf16);
        max = std::max(max, row[j]);
      }
      double total = 0.0;
      for (std::size_t j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - max);
        total += row[j];
      }
      for (std::size_t j = 0; j < n; ++j)
        o[j] += methods::maybe_bf16(static_cast<float>(row[j] / total), bf16);
    }
    for (std::size_t j = 0; j < n; ++j)
      o[j] = methods::maybe_bf16(o[j] / static_cast<float>(group), bf16 && group > 1);
  }
  return out;
}

void cam_accumulate(std::vector<float>& sums, std::span<const float> step, int num_kv_heads,
                    bool bf16) {
  if (num_kv_heads <= 0 || step.size() % to_size(num_kv_heads) != 0 ||
      sums.size() % to_size(num_kv_heads) != 0)
    throw std::invalid_argument("cam: malformed attention sums");
  if (sums.empty()) {
    sums.assign(step.begin(), step.end());
    return;
  }
  const std::size_t n = step.size() / to_size(num_kv_heads);
  const std::size_t prev = sums.size() / to_size(num_kv_heads);
  if (prev > n) throw std::invalid_argument("cam: the cache shrank without a CAM compression");
  std::vector<float> out(step.size());
  for (std::size_t h = 0; h < to_size(num_kv_heads); ++h)
    for (std::size_t j = 0; j < n; ++j) {
      const float a = j < prev ? sums[h * prev + j] : 0.0f;
      out[h * n + j] = methods::maybe_bf16(a + step[h * n + j], bf16);
    }
  sums = std::move(out);
}

CamMergeResult cam_merge(const CamMergeInput& in,
                         const std::function<bool(float, int, int)>& draw) {
  const int n = in.length;
  const int hkv = static_cast<int>(in.values.size());
  const int d = in.head_dim;
  if (n <= in.target_size || in.target_size < 1 || in.merge_budget < 1 || hkv < 1 ||
      in.mean_scores.size() != to_size(n) || in.attention_sums.size() != to_size(hkv) * to_size(n))
    throw std::invalid_argument("cam: malformed merge input");
  for (const auto& v : in.values)
    if (v.size() != to_size(n) * to_size(d))
      throw std::invalid_argument("cam: malformed value rows");
  const bool bf16 = in.bf16;
  const int n_evict = n - in.target_size;
  CamMergeResult out;
  // E: torch.topk(m, n_evict, largest=False) — the same comparator on −m (no NaN scores here).
  std::vector<float> negated(in.mean_scores.begin(), in.mean_scores.end());
  for (float& x : negated) x = -x;
  const std::vector<std::int32_t> evicted = methods::torch_top_k_positions(negated, n_evict);
  out.kept = methods::torch_top_k_positions(in.mean_scores, in.target_size);
  // Candidates: flip E (later first), stable argsort descending by m, first c, sorted ascending.
  std::vector<int> order(to_size(n_evict));
  std::iota(order.begin(), order.end(), 0);  // order[i] = index into flipped E
  const auto flipped_score = [&](int i) {
    return in.mean_scores[to_size(evicted[to_size(n_evict - 1 - i)])];
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return flipped_score(a) > flipped_score(b); });
  const int c = std::clamp(in.steps_since, 0, n_evict);
  for (int i = 0; i < c; ++i)
    out.candidates.push_back(evicted[to_size(n_evict - 1 - order[to_size(i)])]);
  std::sort(out.candidates.begin(), out.candidates.end());
  const int k = static_cast<int>(out.kept.size());
  for (const std::int32_t p : out.candidates) {
    const int t =
        static_cast<int>(std::upper_bound(out.kept.begin(), out.kept.end(), p) - out.kept.begin());
    out.window_start.push_back(t);
    out.window_size.push_back(std::max(0, std::min(in.merge_budget, k - t)));
  }
  // Probabilities, draws and the f32 accumulation of the merged rows.
  const float* sums = in.attention_sums.data();
  out.probability.assign(to_size(hkv), std::vector<float>(out.candidates.size(), 0.0f));
  out.merged.assign(to_size(hkv), std::vector<bool>(out.candidates.size(), false));
  for (int h = 0; h < hkv; ++h) {
    const float* a = sums + to_size(h) * to_size(n);
    std::vector<std::vector<float>> acc(
        to_size(k));  // kept slot → accumulated row (empty: untouched)
    for (std::size_t ci = 0; ci < out.candidates.size(); ++ci) {
      const int t = out.window_start[ci], b = out.window_size[ci];
      float window_sum = 0.0f;
      for (int w = 0; w < b; ++w) window_sum += a[out.kept[to_size(t + w)]];
      window_sum = methods::maybe_bf16(window_sum, bf16);
      const float mean = methods::maybe_bf16(window_sum / static_cast<float>(std::max(b, 1)), bf16);
      float p = methods::maybe_bf16(a[out.candidates[ci]] / mean, bf16);
      if (std::isnan(p)) p = 0.0f;
      if (std::isinf(p) && p > 0) p = 1.0f;
      p = std::clamp(p, 0.0f, 1.0f);
      out.probability[to_size(h)][ci] = p;
      const bool m = draw(p, h, static_cast<int>(ci));
      out.merged[to_size(h)][ci] = m;
      if (!m) continue;
      ++out.merges;
      if (b == 0) continue;
      const float scale = methods::maybe_bf16(1.0f / static_cast<float>(b), bf16);
      const float* vp = in.values[to_size(h)].data() + to_size(out.candidates[ci]) * to_size(d);
      for (int w = 0; w < b; ++w) {
        std::vector<float>& row = acc[to_size(t + w)];
        if (row.empty()) {
          const float* vw =
              in.values[to_size(h)].data() + to_size(out.kept[to_size(t + w)]) * to_size(d);
          row.assign(vw, vw + d);
        }
        for (int i = 0; i < d; ++i) row[to_size(i)] += methods::maybe_bf16(vp[i] * scale, bf16);
      }
    }
    for (int slot = 0; slot < k; ++slot) {
      if (acc[to_size(slot)].empty()) continue;
      CamMergeResult::Row row{h, out.kept[to_size(slot)], std::move(acc[to_size(slot)])};
      for (float& x : row.value) x = methods::maybe_bf16(x, bf16);
      out.replacements.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace kvaudit::unit
