// The inner loops of CPU attention, compiled for each instruction-set level (scalar, AVX2+FMA,
// AVX-512; cpu_isa.h) and dispatched on the active one, so the library needs no -march flag and
// still uses wide vectors.
//
// Every output element is computed in one fixed order (docs/design/numerics.md §Canonical
// evaluation order): a fused multiply-add chain over the head dimension for scores and over keys
// for the weighted value sum, softmax sums over 16 lanes combined by a fixed tree, the exponential
// one fused polynomial. Results therefore depend neither on the tile shapes, nor on how many rows
// are processed together, nor on the level.
#pragma once

#include <cstddef>

#include "runners/cpu/key_panels.h"

namespace kvaudit::cpu {

// Score buffers are padded to whole key panels (key_panels.h).
std::size_t padded_key_count(std::size_t count);

// scores[r·score_stride + j] = Σ_e queries[r·query_stride + e] · key(first_key + j)[e]
// for r < rows (1 ≤ rows ≤ 4) and j < padded_key_count(columns), keys read from `key_panels`
// (key_panels.h layout; first_key a multiple of kKeyPanel; lanes past the last key give 0 or
// unused values). score_stride ≥ padded_key_count(columns). Summation over e in order.
void score_tile(const float* queries, std::size_t query_stride, std::size_t rows,
                const float* key_panels, std::size_t first_key, std::size_t columns,
                std::size_t dim, float* scores, std::size_t score_stride);

// accumulators[r·accumulator_stride + d] += Σ_{j ∈ [begin, end)} weights[r·weight_stride + j] ·
// values[j·dim + d] for r < rows (1 ≤ rows ≤ 4), d < dim, j in increasing order.
void accumulate_tile(const float* weights, std::size_t weight_stride, std::size_t rows,
                     const float* values, std::size_t begin, std::size_t end, std::size_t dim,
                     float* accumulators, std::size_t accumulator_stride);

// Eager softmax of one score row in place (attention_eager.cpp has the formula):
//   s = [[s]·scale]; p = [exp(s − max) / Σ exp(s − max)]   (brackets: bf16 rounding if bf16)
void eager_probabilities(float* scores, std::size_t count, float scale, bool bf16);

// One online-softmax step of one row over a block of raw scores (attention_sdpa.cpp has the
// formula): updates running_max and running_sum, replaces the scores by [p], and returns the factor
// α by which the row's value accumulator must be rescaled.
float online_softmax_block(float* scores, std::size_t count, float scale_log2, bool bf16,
                           float& running_max, float& running_sum);

}  // namespace kvaudit::cpu
