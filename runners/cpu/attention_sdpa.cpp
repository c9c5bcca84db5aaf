// sdpa attention: flash-style online softmax (FlashAttention-2/3 numerics,
// docs/design/numerics.md §sdpa and Dao-AILab/flash-attention hopper/softmax.h) over blocks of
// `key_block` visible keys; per (query row, head):
//   s_j = q·k_j in fp32 (never rounded, scale not yet applied)
//   m' = max(m, max_j s_j);  c = scale·log2(e);  α = exp2(m·c − m'·c)
//   p_j = exp2(s_j·c − m'·c);  l = α·l + Σ_j p_j (fp32 p);  acc = α·acc + Σ_j [p_j]·v_j
//   out = [acc / l]
// A task (one KV head's query heads, a chunk of rows) walks the key blocks (whole key panels,
// key_panels.h) once and updates its (row, head) pairs four at a time (attention.h AttentionTile);
// each pair's sequence of block updates is the same however pairs are grouped.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <numbers>

#include "runners/cpu/attention.h"
#include "runners/cpu/attention_math.h"
#include "runners/cpu/attention_visibility.h"

namespace kvaudit::cpu {

void sdpa_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                         std::size_t key_block, std::span<float> out, std::vector<float>& scratch) {
  constexpr std::size_t kTile = AttentionTile::kMaxPairs;
  const std::size_t dim = static_cast<std::size_t>(problem.head_dim);
  const std::size_t heads = static_cast<std::size_t>(problem.num_heads);
  const std::size_t group = static_cast<std::size_t>(problem.num_heads / problem.num_kv_heads);
  const KvHeadView& kv = problem.kv_heads[static_cast<std::size_t>(task.kv_head)];
  const bool bf16 = problem.rounding == Rounding::bf16;
  const float scale_log2 = problem.scale * std::numbers::log2e_v<float>;
  key_block = padded_key_count(std::max<std::size_t>(key_block, 1));  // whole key panels
  if (task.row_end <= task.row_begin) return;
  const std::size_t pairs = (task.row_end - task.row_begin) * group;

  const std::size_t stride = padded_key_count(key_block);
  // scratch: scores [kTile, stride], per pair: max, sum, accumulator [dim]
  scratch.resize(kTile * stride + pairs * (2 + dim));
  float* scores = scratch.data();
  float* running_max = scores + kTile * stride;
  float* running_sum = running_max + pairs;
  float* accumulators = running_sum + pairs;
  std::fill(running_max, running_max + pairs, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + pairs, 0.0f);
  std::fill(accumulators, accumulators + pairs * dim, 0.0f);

  std::vector<std::size_t> visible(task.row_end - task.row_begin);  // per row
  std::size_t task_keys = 0;
  for (std::size_t r = 0; r < visible.size(); ++r) {
    visible[r] = visible_prefix(kv.positions, problem.query_positions[task.row_begin + r]);
    task_keys = std::max(task_keys, visible[r]);
  }
  const std::vector<AttentionTile> tiles = attention_tiles(problem, task);

  for (std::size_t begin = 0; begin < task_keys; begin += key_block) {
    const std::size_t count = std::min(key_block, task_keys - begin);
    const float* values = kv.values.data() + begin * dim;
    for (const AttentionTile& tile : tiles) {
      std::size_t columns[kTile] = {};
      std::size_t most = 0, least = count;
      for (std::size_t i = 0; i < tile.count; ++i) {
        const std::size_t v = visible[tile.row[i] - task.row_begin];
        columns[i] = v > begin ? std::min(count, v - begin) : 0;
        most = std::max(most, columns[i]);
        least = std::min(least, columns[i]);
      }
      if (most == 0) continue;
      const float* queries = problem.queries.data() + (tile.row[0] * heads + tile.head[0]) * dim;
      score_tile(queries, tile.query_stride, tile.count, kv.key_panels.data(), begin, most, dim,
                 scores, stride);
      for (std::size_t i = 0; i < tile.count; ++i) {
        if (columns[i] == 0) continue;
        const std::size_t p = tile.pair[i];
        const float correction = online_softmax_block(scores + i * stride, columns[i], scale_log2,
                                                      bf16, running_max[p], running_sum[p]);
        float* acc = accumulators + p * dim;
        for (std::size_t d = 0; d < dim; ++d) acc[d] *= correction;
      }
      // The prefix every pair sees, all pairs at once; then each pair's remainder (same j order).
      const std::size_t accumulator_stride = tile.pair_stride * dim;
      accumulate_tile(scores, stride, tile.count, values, 0, least, dim,
                      accumulators + tile.pair[0] * dim, accumulator_stride);
      for (std::size_t i = 0; i < tile.count; ++i) {
        accumulate_tile(scores + i * stride, stride, 1, values, least, columns[i], dim,
                        accumulators + tile.pair[i] * dim, dim);
      }
    }
  }
  for (std::size_t r = 0; r < visible.size(); ++r) {
    for (std::size_t h = 0; h < group; ++h) {
      const std::size_t p = r * group + h;
      const std::size_t head = static_cast<std::size_t>(task.kv_head) * group + h;
      float* output = out.data() + ((task.row_begin + r) * heads + head) * dim;
      const float* acc = accumulators + p * dim;
      for (std::size_t d = 0; d < dim; ++d) {
        output[d] = visible[r] == 0 ? 0.0f : round_as(problem.rounding, acc[d] / running_sum[p]);
      }
    }
  }
}

void attention_sdpa(const AttentionProblem& problem, std::size_t key_block, std::span<float> out) {
  validate_attention_problem(problem, out);
  const std::vector<AttentionTask> tasks = split_attention_tasks(problem, 64);
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(tasks.size());
#pragma omp parallel if (count > 1)
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      sdpa_attention_task(problem, tasks[static_cast<std::size_t>(i)], key_block, out, scratch);
    }
  }
}

}  // namespace kvaudit::cpu
