// The preregistered calibration/test split of a benchmark's instances, per task: a permutation of
// the instance indices drawn with Philox4x32-10 keyed by the study seed and the (benchmark, task)
// pair; its first `calibration` entries are calibration instances, the next `test` are test
// instances, the rest take part in no certification. Independent of rank count and of run order.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvaudit::manifest {

enum class Split : std::int8_t { none = 0, calibration = 1, test = 2 };

std::vector<Split> split_instances(std::uint64_t seed, std::string_view benchmark,
                                   std::string_view task, std::int64_t instances,
                                   std::int64_t calibration, std::int64_t test);

// The permutation itself (exposed for tests): a uniformly random ordering of 0..n-1.
std::vector<std::int64_t> seeded_permutation(std::uint64_t seed, std::string_view stream,
                                             std::int64_t n);

}  // namespace kvaudit::manifest
