// Shared parts of the two attention backends: validation and task splitting; see attention.h.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "runners/cpu/attention.h"
#include "runners/cpu/key_panels.h"
#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {

void validate_attention_problem(const AttentionProblem& problem, std::span<const float> out) {
  if (problem.num_heads <= 0 || problem.num_kv_heads <= 0 || problem.head_dim <= 0 ||
      problem.num_heads % problem.num_kv_heads != 0) {
    throw std::invalid_argument("attention: num_heads (" + std::to_string(problem.num_heads) +
                                ") must be a positive multiple of num_kv_heads (" +
                                std::to_string(problem.num_kv_heads) + ")");
  }
  const std::size_t row_size =
      static_cast<std::size_t>(problem.num_heads) * static_cast<std::size_t>(problem.head_dim);
  require_size(problem.queries, problem.num_rows() * row_size, "attention: queries");
  require_size(out, problem.num_rows() * row_size, "attention: out");
  require_size(problem.kv_heads, static_cast<std::size_t>(problem.num_kv_heads),
               "attention: kv_heads");
  for (const KvHeadView& head : problem.kv_heads) {
    require_size(head.keys, head.size() * static_cast<std::size_t>(problem.head_dim),
                 "attention: keys");
    require_size(head.values, head.size() * static_cast<std::size_t>(problem.head_dim),
                 "attention: values");
    require_size(head.key_panels,
                 key_panel_floats(head.size(), static_cast<std::size_t>(problem.head_dim)),
                 "attention: key_panels");
  }
}

std::vector<AttentionTask> split_attention_tasks(const AttentionProblem& problem,
                                                 std::size_t rows_per_task) {
  if (rows_per_task == 0) throw std::invalid_argument("attention: rows per task must be >= 1");
  std::vector<AttentionTask> tasks;
  const std::size_t rows = problem.num_rows();
  for (int kv_head = 0; kv_head < problem.num_kv_heads; ++kv_head) {
    for (std::size_t begin = 0; begin < rows; begin += rows_per_task) {
      tasks.push_back({kv_head, begin, std::min(rows, begin + rows_per_task)});
    }
  }
  return tasks;
}

std::vector<AttentionTile> attention_tiles(const AttentionProblem& problem,
                                           const AttentionTask& task) {
  const std::size_t group = static_cast<std::size_t>(problem.num_heads / problem.num_kv_heads);
  const std::size_t first_head = static_cast<std::size_t>(task.kv_head) * group;
  const std::size_t dim = static_cast<std::size_t>(problem.head_dim);
  const std::size_t rows = task.row_end - task.row_begin;
  constexpr std::size_t kMax = AttentionTile::kMaxPairs;
  std::vector<AttentionTile> tiles;
  if (group >= kMax || rows == 1) {
    for (std::size_t row = task.row_begin; row < task.row_end; ++row) {
      for (std::size_t h0 = 0; h0 < group; h0 += kMax) {
        AttentionTile tile;
        tile.count = std::min(kMax, group - h0);
        tile.query_stride = dim;
        tile.pair_stride = 1;
        for (std::size_t i = 0; i < tile.count; ++i) {
          tile.row[i] = row;
          tile.head[i] = first_head + h0 + i;
          tile.pair[i] = (row - task.row_begin) * group + h0 + i;
        }
        tiles.push_back(tile);
      }
    }
  } else {
    for (std::size_t h = 0; h < group; ++h) {
      for (std::size_t r0 = task.row_begin; r0 < task.row_end; r0 += kMax) {
        AttentionTile tile;
        tile.count = std::min(kMax, task.row_end - r0);
        tile.query_stride = static_cast<std::size_t>(problem.num_heads) * dim;
        tile.pair_stride = group;
        for (std::size_t i = 0; i < tile.count; ++i) {
          tile.row[i] = r0 + i;
          tile.head[i] = first_head + h;
          tile.pair[i] = (r0 + i - task.row_begin) * group + h;
        }
        tiles.push_back(tile);
      }
    }
  }
  return tiles;
}

}  // namespace kvaudit::cpu
