// How the fan-out (unit_runner.h) splits the time of a step several cells share into per-cell
// shares, so that a cell's costs (CellResult) add up, over the unit's cells, to what the unit
// measured (docs/RECORDS.md §Costs):
//   prefill      the one prefill of the unit (capture hooks included): equal shares over all the
//                unit's cells;
//   capture      the capture's host views of one boundary: equal shares over the cells that
//                select on those views;
//   extra pass   one (boundary, pass key) pass (KVzip): equal shares over the cells that use it;
//   feed         one batched prefill of the rest of the prompt: shares ∝ the tokens each cell fed;
//   decode       each batched decode step's time in equal shares over the cells decoded in that
//                step (generate_greedy_batch), then the batch's time outside the steps (argmax
//                of the first token, bookkeeping) in equal shares over the batch's cells.
// Selection and eviction are each cell's own, except under reuse, where one selection and one
// eviction serve the cell's k questions: equal shares over its k records (kSelectShare,
// kEvictShare; each record's own fork of the compressed cache adds to its evict share). On the
// naive route every step is the cell's own. CostShare bits mark which of a cell's costs are shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvaudit::unit {

// Bits of CellResult::shared_costs (the same values as records::SharedCost).
enum CostShare : std::uint32_t {
  kPrefillShare = 1u << 0,
  kCaptureShare = 1u << 1,
  kExtraPassShare = 1u << 2,
  kFeedShare = 1u << 3,
  kDecodeShare = 1u << 4,
  kSelectShare = 1u << 5,  // reuse: a cell's selection shared by its questions
  kEvictShare = 1u << 6,   // reuse: a cell's eviction shared by its questions
};

// `total` in `count` equal shares (empty for count 0).
std::vector<double> equal_shares(double total, std::size_t count);

// `total` split ∝ weights; all-zero weights split it equally.
std::vector<double> proportional_shares(double total, std::span<const std::size_t> weights);

// One batched step of `seconds` shared by the sequences `alive` (indices into shares): each gets
// seconds / alive.size() added.
void add_step_share(std::span<double> shares, std::span<const std::size_t> alive, double seconds);

// The shares measured inside a batch (`measured`, e.g. the decode steps' shares) completed to the
// batch's measured `total`: the remainder total − Σ measured is added in equal shares, so the
// result sums to total.
std::vector<double> complete_shares(double total, std::span<const double> measured);

}  // namespace kvaudit::unit
