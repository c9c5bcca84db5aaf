// Eager attention: HF `eager_attention_forward` numerics over the ragged cache.
//   s_j = [q·k_j]; s_j = [s_j · scale]          (HF: matmul → bf16, `* scaling` → bf16)
//   masked keys (position > query) are excluded  (HF adds finfo.min; exp gives exactly 0)
//   p_j = [exp(s_j − max) / Σ exp(s − max)]      (fp32 softmax of the upcast scores, → bf16)
//   out = [Σ_j p_j · v_j]                        (fp32 accumulation, → bf16)
// A task (one KV head's query heads, a chunk of query rows) takes (row, head) pairs four at a time
// (attention.h AttentionTile): scores of the tile (one row of keys per pair, so memory is bounded
// by the chunk), the softmax of each pair over its own visible prefix, then the weighted value sum.
// Each element is summed in a fixed order (attention_math.h), so results do not depend on the chunk
// size or on how pairs are tiled.
#include <algorithm>
#include <cstddef>

#include "runners/cpu/attention.h"
#include "runners/cpu/attention_math.h"
#include "runners/cpu/attention_visibility.h"

namespace kvaudit::cpu {

void eager_attention_task(const AttentionProblem& problem, const AttentionTask& task,
                          std::span<float> out, std::vector<float>& scratch) {
  constexpr std::size_t kTile = AttentionTile::kMaxPairs;
  const std::size_t dim = static_cast<std::size_t>(problem.head_dim);
  const std::size_t heads = static_cast<std::size_t>(problem.num_heads);
  const KvHeadView& kv = problem.kv_heads[static_cast<std::size_t>(task.kv_head)];
  const bool bf16 = problem.rounding == Rounding::bf16;
  if (task.row_end <= task.row_begin) return;

  std::size_t task_keys = 0;  // keys visible to the task's last-seeing row
  for (std::size_t row = task.row_begin; row < task.row_end; ++row) {
    task_keys = std::max(task_keys, visible_prefix(kv.positions, problem.query_positions[row]));
  }
  const std::size_t stride = padded_key_count(task_keys);
  // scratch: scores [kTile, stride], accumulators [kTile, dim]
  scratch.resize(kTile * stride + kTile * dim);
  float* scores = scratch.data();
  float* accumulators = scores + kTile * stride;

  for (const AttentionTile& tile : attention_tiles(problem, task)) {
    std::size_t visible[kTile] = {};
    std::size_t most = 0, least = task_keys;
    for (std::size_t i = 0; i < tile.count; ++i) {
      visible[i] = visible_prefix(kv.positions, problem.query_positions[tile.row[i]]);
      most = std::max(most, visible[i]);
      least = std::min(least, visible[i]);
    }
    const float* queries = problem.queries.data() + (tile.row[0] * heads + tile.head[0]) * dim;
    if (most > 0) {
      score_tile(queries, tile.query_stride, tile.count, kv.key_panels.data(), 0, most, dim, scores,
                 stride);
    }
    for (std::size_t i = 0; i < tile.count; ++i) {
      eager_probabilities(scores + i * stride, visible[i], problem.scale, bf16);
    }
    std::fill(accumulators, accumulators + tile.count * dim, 0.0f);
    // The prefix every pair sees, all pairs at once; then each pair's own remainder (same j order).
    accumulate_tile(scores, stride, tile.count, kv.values.data(), 0, least, dim, accumulators, dim);
    for (std::size_t i = 0; i < tile.count; ++i) {
      accumulate_tile(scores + i * stride, stride, 1, kv.values.data(), least, visible[i], dim,
                      accumulators + i * dim, dim);
      float* output = out.data() + (tile.row[i] * heads + tile.head[i]) * dim;
      for (std::size_t d = 0; d < dim; ++d) {
        output[d] = round_as(problem.rounding, accumulators[i * dim + d]);
      }
    }
  }
}

void attention_eager(const AttentionProblem& problem, std::size_t query_chunk,
                     std::span<float> out) {
  validate_attention_problem(problem, out);
  const std::vector<AttentionTask> tasks = split_attention_tasks(problem, query_chunk);
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(tasks.size());
#pragma omp parallel if (count > 1)
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      eager_attention_task(problem, tasks[static_cast<std::size_t>(i)], out, scratch);
    }
  }
}

}  // namespace kvaudit::cpu
