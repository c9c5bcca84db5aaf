// Validation and preprocessing of paired comparisons, and the replicate kernel of the stratified
// paired bootstrap (see bootstrap_plan.h and paired_bootstrap.h for the procedure).
#include "statistics/bootstrap_plan.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "base/errors.h"
#include "statistics/rng.h"

namespace kvaudit::stats {
namespace {

constexpr std::uint64_t kMaxReplicates = 0xffffffffull;  // b is a 32-bit counter word
constexpr std::size_t kMaxStratumSize = 0xffffffffull;   // indices are 32-bit

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

bool is_small_integer(double d) { return d == std::nearbyint(d) && d >= -127.0 && d <= 127.0; }

constexpr std::size_t kVectorBytes = 32;                   // one AVX2 register; two SSE2 registers
constexpr std::size_t kMaxPadding = std::size_t{1} << 20;  // bytes of row padding per stratum

template <typename T>
void store_lane(std::uint8_t* lane, T value) {
  std::memcpy(lane, &value, sizeof value);
}

// Lane k of an accumulator of `width`-byte lanes, read as two's complement.
std::int64_t load_signed_lane(const std::uint8_t* acc, std::size_t k, std::uint32_t width) {
  const std::uint8_t* lane = acc + k * width;
  switch (width) {
    case 1: {
      std::uint8_t v = 0;
      std::memcpy(&v, lane, 1);
      return static_cast<std::int8_t>(v);
    }
    case 2: {
      std::uint16_t v = 0;
      std::memcpy(&v, lane, 2);
      return static_cast<std::int16_t>(v);
    }
    case 4: {
      std::uint32_t v = 0;
      std::memcpy(&v, lane, 4);
      return static_cast<std::int32_t>(v);
    }
    default: {
      std::uint64_t v = 0;
      std::memcpy(&v, lane, 8);
      return static_cast<std::int64_t>(v);
    }
  }
}

// GCC/Clang vector extensions (32 bytes): element-wise wrap-around integer adds, IEEE double adds.
typedef std::uint8_t U8x32 __attribute__((vector_size(32)));
typedef std::uint16_t U16x16 __attribute__((vector_size(32)));
typedef std::uint32_t U32x8 __attribute__((vector_size(32)));
typedef std::uint64_t U64x4 __attribute__((vector_size(32)));
typedef double F64x4 __attribute__((vector_size(32)));

// acc[0, M·L) = Σ_i rows[idx_i][0, M·L), i = 0, 1, … in order, M vectors of L lanes held in
// registers.
template <typename V, typename Lane, int M>
[[gnu::always_inline]] inline void add_block(Lane* acc, const Lane* rows, std::size_t stride,
                                             const std::uint32_t* idx, std::uint32_t n) {
  constexpr std::size_t L = sizeof(V) / sizeof(Lane);
  V a[M] = {};
  for (std::uint32_t i = 0; i < n; ++i) {
    const Lane* row = rows + static_cast<std::size_t>(idx[i]) * stride;
#pragma GCC unroll 8  // a[] must live in registers
    for (int v = 0; v < M; ++v) {
      V x;
      std::memcpy(&x, row + v * L, sizeof x);
      a[v] += x;
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < M; ++v) std::memcpy(acc + v * L, &a[v], sizeof(V));
}

// acc[0, stride) = Σ_i rows[idx_i], stride a multiple of the lanes per vector; blocks of up to 8
// vectors.
template <typename V, typename Lane>
[[gnu::always_inline]] inline void add_rows(Lane* acc, const Lane* rows, std::size_t stride,
                                            const std::uint32_t* idx, std::uint32_t n) {
  constexpr std::size_t L = sizeof(V) / sizeof(Lane);
  const std::size_t vectors = stride / L;
  std::size_t v0 = 0;
  for (; v0 + 8 <= vectors; v0 += 8)
    add_block<V, Lane, 8>(acc + v0 * L, rows + v0 * L, stride, idx, n);
  Lane* a = acc + v0 * L;
  const Lane* r = rows + v0 * L;
  switch (vectors - v0) {
    case 7:
      add_block<V, Lane, 7>(a, r, stride, idx, n);
      break;
    case 6:
      add_block<V, Lane, 6>(a, r, stride, idx, n);
      break;
    case 5:
      add_block<V, Lane, 5>(a, r, stride, idx, n);
      break;
    case 4:
      add_block<V, Lane, 4>(a, r, stride, idx, n);
      break;
    case 3:
      add_block<V, Lane, 3>(a, r, stride, idx, n);
      break;
    case 2:
      add_block<V, Lane, 2>(a, r, stride, idx, n);
      break;
    case 1:
      add_block<V, Lane, 1>(a, r, stride, idx, n);
      break;
    default:
      break;
  }
}

// The lanes of one stratum for one replicate (StratumLanes in bootstrap_plan.h). Compiled twice
// on x86-64 GCC/Clang, for AVX2 and for the baseline, and chosen once at load time (ifunc).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(KVAUDIT_NO_AVX2)
__attribute__((target_clones("avx2", "default")))
#endif
void add_lanes(const std::uint32_t* idx, std::uint32_t n, std::uint32_t integer_bytes,
               const std::uint8_t* integer_rows, std::size_t integer_stride,
               std::uint8_t* integer_acc, const double* wide_rows, std::size_t wide_stride,
               double* wide_acc) {
  switch (integer_bytes) {
    case 1:
      add_rows<U8x32>(integer_acc, integer_rows, integer_stride, idx, n);
      break;
    case 2:
      add_rows<U16x16>(reinterpret_cast<std::uint16_t*>(integer_acc),
                       reinterpret_cast<const std::uint16_t*>(integer_rows), integer_stride / 2,
                       idx, n);
      break;
    case 4:
      add_rows<U32x8>(reinterpret_cast<std::uint32_t*>(integer_acc),
                      reinterpret_cast<const std::uint32_t*>(integer_rows), integer_stride / 4, idx,
                      n);
      break;
    case 8:
      add_rows<U64x4>(reinterpret_cast<std::uint64_t*>(integer_acc),
                      reinterpret_cast<const std::uint64_t*>(integer_rows), integer_stride / 8, idx,
                      n);
      break;
    default:
      break;
  }
  if (wide_stride > 0) add_rows<F64x4>(wide_acc, wide_rows, wide_stride, idx, n);
}

}  // namespace

void validate_paired_comparisons(const std::vector<PairedComparison>& comparisons,
                                 std::size_t first, std::size_t count) {
  if (first + count > comparisons.size()) {
    throw InternalError("validate_paired_comparisons: range past the end");
  }
  // stratum id -> (size, name of the first comparison that used it)
  std::map<std::uint32_t, std::pair<std::size_t, std::string>> sizes;
  for (std::size_t c = first; c < first + count; ++c) {
    const PairedComparison& comparison = comparisons[c];
    const std::string where = "paired bootstrap: comparison " + in_quotes(comparison.name);
    if (comparison.strata.empty()) throw InputError(where + ": no strata");
    std::set<std::uint32_t> seen;
    for (const PairedStratum& stratum : comparison.strata) {
      const std::string at = where + ", stratum " + std::to_string(stratum.id);
      if (!seen.insert(stratum.id).second) throw InputError(at + ": stratum id appears twice");
      if (stratum.arm_a.size() != stratum.arm_b.size()) {
        throw InputError(at + ": arm A has " + std::to_string(stratum.arm_a.size()) +
                         " instances but arm B has " + std::to_string(stratum.arm_b.size()) +
                         " (arms must be paired instance by instance)");
      }
      if (stratum.arm_a.empty()) throw InputError(at + ": no instances");
      if (stratum.arm_a.size() > kMaxStratumSize) {
        throw InputError(at + ": more than 2^32 - 1 instances");
      }
      for (std::size_t i = 0; i < stratum.arm_a.size(); ++i) {
        if (!std::isfinite(stratum.arm_a[i]) || !std::isfinite(stratum.arm_b[i])) {
          throw InputError(at + ": utility of instance " + std::to_string(i) + " is not finite");
        }
      }
      const auto [it, inserted] =
          sizes.try_emplace(stratum.id, stratum.arm_a.size(), comparison.name);
      if (!inserted && it->second.first != stratum.arm_a.size()) {
        throw InputError(at + ": " + std::to_string(stratum.arm_a.size()) +
                         " instances, but comparison " + in_quotes(it->second.second) + " has " +
                         std::to_string(it->second.first) +
                         " for the same stratum id (a stratum id must name the same instances "
                         "in every comparison)");
      }
    }
  }
}

void validate_bootstrap_options(const BootstrapOptions& options) {
  if (options.resamples < 1 || static_cast<std::uint64_t>(options.resamples) > kMaxReplicates) {
    throw InputError("paired bootstrap: resamples must be in [1, 2^32 - 1], got " +
                     std::to_string(options.resamples));
  }
  if (!(options.confidence > 0.0 && options.confidence < 1.0)) {
    throw InputError("paired bootstrap: confidence must be in (0, 1), got " +
                     std::to_string(options.confidence));
  }
  if (options.threads < 0) {
    throw InputError("paired bootstrap: threads must be >= 0 (0: all cores), got " +
                     std::to_string(options.threads));
  }
  if (options.comparisons_per_pass < 1) {
    throw InputError("paired bootstrap: comparisons_per_pass must be >= 1");
  }
}

int resolve_threads(const BootstrapOptions& options) {
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::int64_t count_at_or_below_zero(const std::vector<double>& replicates) {
  std::int64_t count = 0;
  for (double r : replicates) count += (r <= 0.0) ? 1 : 0;
  return count;
}

BootstrapPlan::BootstrapPlan(const std::vector<PairedComparison>& comparisons, std::size_t first,
                             std::size_t count, Aggregate aggregate)
    : aggregate_(aggregate) {
  validate_paired_comparisons(comparisons, first, count);
  std::map<std::uint32_t, std::uint32_t> sizes;
  for (std::size_t c = first; c < first + count; ++c) {
    for (const PairedStratum& stratum : comparisons[c].strata) {
      sizes[stratum.id] = static_cast<std::uint32_t>(stratum.arm_a.size());
    }
  }
  std::map<std::uint32_t, std::size_t> position;
  for (const auto& [id, size] : sizes) {
    position[id] = strata_.size();
    strata_.push_back({id, size});
    max_stratum_size_ = std::max(max_stratum_size_, size);
  }
  // For each stratum: (comparison, part) pairs that use it, in comparison order.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> users(strata_.size());

  for (std::size_t c = first; c < first + count; ++c) {
    const PairedComparison& input = comparisons[c];
    Comparison comparison;
    comparison.name = input.name;
    // Parts in ascending stratum id: the order in which replicates (and the estimate) add them.
    std::vector<const PairedStratum*> ordered;
    for (const PairedStratum& stratum : input.strata) ordered.push_back(&stratum);
    std::sort(ordered.begin(), ordered.end(),
              [](const PairedStratum* x, const PairedStratum* y) { return x->id < y->id; });
    comparison.integer = true;
    for (const PairedStratum* stratum : ordered) {
      for (std::size_t i = 0; i < stratum->arm_a.size(); ++i) {
        if (!is_small_integer(stratum->arm_a[i] - stratum->arm_b[i])) comparison.integer = false;
      }
    }
    double total_a = 0;
    double total_b = 0;
    double total_d = 0;
    for (const PairedStratum* stratum : ordered) {
      Part part;
      part.stratum = position.at(stratum->id);
      part.size = static_cast<std::uint32_t>(stratum->arm_a.size());
      double sum_a = 0;
      double sum_b = 0;
      if (comparison.integer) {
        part.offset = comparison.small.size();
        std::int64_t sum = 0;
        for (std::size_t i = 0; i < part.size; ++i) {
          const auto d = static_cast<std::int8_t>(stratum->arm_a[i] - stratum->arm_b[i]);
          comparison.small.push_back(d);
          sum += d;
          sum_a += stratum->arm_a[i];
          sum_b += stratum->arm_b[i];
        }
        part.sum = static_cast<double>(sum);
      } else {
        part.offset = comparison.wide.size();
        double sum = 0;
        for (std::size_t i = 0; i < part.size; ++i) {
          const double d = stratum->arm_a[i] - stratum->arm_b[i];
          comparison.wide.push_back(d);
          sum += d;
          sum_a += stratum->arm_a[i];
          sum_b += stratum->arm_b[i];
        }
        part.sum = sum;
      }
      comparison.instances += part.size;
      if (aggregate_ == Aggregate::pooled) {
        total_a += sum_a;
        total_b += sum_b;
        total_d += part.sum;
      } else {
        total_a += sum_a / part.size;
        total_b += sum_b / part.size;
        total_d += part.sum / part.size;
      }
      users[part.stratum].emplace_back(comparisons_.size(), comparison.parts.size());
      comparison.parts.push_back(part);
    }
    const double divisor = aggregate_ == Aggregate::pooled
                               ? static_cast<double>(comparison.instances)
                               : static_cast<double>(comparison.parts.size());
    comparison.mean_a = total_a / divisor;
    comparison.mean_b = total_b / divisor;
    comparison.estimate = total_d / divisor;
    comparisons_.push_back(std::move(comparison));
  }
  plan_lanes(users);
}

void BootstrapPlan::plan_lanes(
    const std::vector<std::vector<std::pair<std::size_t, std::size_t>>>& users) {
  lanes_.assign(strata_.size(), StratumLanes{});
  for (std::size_t s = 0; s < strata_.size(); ++s) {
    const std::size_t n = strata_[s].size;
    std::vector<std::pair<std::size_t, const Part*>> integer_parts, wide_parts;
    int largest = 0;  // max |d| over the integer parts
    for (const auto& [c, p] : users[s]) {
      const Comparison& comparison = comparisons_[c];
      const Part& part = comparison.parts[p];
      bool nonzero = false;
      for (std::uint32_t i = 0; i < part.size; ++i) {
        if (comparison.integer) {
          const int d = comparison.small[part.offset + i];
          nonzero = nonzero || d != 0;
          largest = std::max(largest, d < 0 ? -d : d);
        } else {
          nonzero = nonzero || comparison.wide[part.offset + i] != 0.0;
        }
      }
      if (!nonzero) continue;  // adds exactly 0 to every replicate
      (comparison.integer ? integer_parts : wide_parts).emplace_back(c, &part);
    }
    StratumLanes& lanes = lanes_[s];
    if (!integer_parts.empty()) {
      // The narrowest lane that holds every partial sum: |Σ| ≤ max|d|·n.
      const double bound = static_cast<double>(largest) * static_cast<double>(n);
      lanes.integer_bytes = bound <= 127 ? 1 : bound <= 32767 ? 2 : bound <= 2147483647.0 ? 4 : 8;
      const std::size_t used = integer_parts.size() * lanes.integer_bytes;
      const std::size_t padded = (used + kVectorBytes - 1) / kVectorBytes * kVectorBytes;
      lanes.integer_narrow = (padded - used) * n > kMaxPadding;
      if (lanes.integer_narrow) lanes.integer_bytes = 1;  // int8 values, int64 sums
      const std::size_t width = lanes.integer_bytes;
      lanes.integer_stride = lanes.integer_narrow ? integer_parts.size() : padded;
      lanes.integer_rows.assign(n * lanes.integer_stride, 0);
      for (std::size_t k = 0; k < integer_parts.size(); ++k) {
        const auto& [c, part] = integer_parts[k];
        lanes.integer_comparisons.push_back(static_cast<std::uint32_t>(c));
        for (std::size_t j = 0; j < n; ++j) {
          // Two's complement in `width` bytes (host byte order, as the lanes are read back).
          const auto d = static_cast<std::int64_t>(comparisons_[c].small[part->offset + j]);
          std::uint8_t* lane = &lanes.integer_rows[j * lanes.integer_stride + k * width];
          if (width == 1) store_lane(lane, static_cast<std::uint8_t>(d));
          if (width == 2) store_lane(lane, static_cast<std::uint16_t>(d));
          if (width == 4) store_lane(lane, static_cast<std::uint32_t>(d));
          if (width == 8) store_lane(lane, static_cast<std::uint64_t>(d));
        }
      }
    }
    if (!wide_parts.empty()) {
      constexpr std::size_t kPerVector = kVectorBytes / sizeof(double);
      lanes.wide_stride = (wide_parts.size() + kPerVector - 1) / kPerVector * kPerVector;
      lanes.wide_narrow =
          (lanes.wide_stride - wide_parts.size()) * sizeof(double) * n > kMaxPadding;
      if (lanes.wide_narrow) lanes.wide_stride = wide_parts.size();
      lanes.wide_rows.assign(n * lanes.wide_stride, 0.0);
      for (std::size_t k = 0; k < wide_parts.size(); ++k) {
        const auto& [c, part] = wide_parts[k];
        lanes.wide_comparisons.push_back(static_cast<std::uint32_t>(c));
        for (std::size_t j = 0; j < n; ++j) {
          lanes.wide_rows[j * lanes.wide_stride + k] = comparisons_[c].wide[part->offset + j];
        }
      }
    }
  }
}

void BootstrapPlan::replicate_range(std::uint64_t seed, std::uint32_t begin, std::uint32_t end,
                                    std::uint32_t out_offset,
                                    std::vector<std::vector<double>>& out) const {
  std::vector<std::uint32_t> indices(max_stratum_size_);
  std::size_t integer_bytes = 0, wide_lanes = 0;
  for (const StratumLanes& lanes : lanes_) {
    integer_bytes = std::max(integer_bytes, lanes.integer_stride);
    wide_lanes = std::max(wide_lanes, lanes.wide_stride);
  }
  std::vector<std::uint8_t> integer_acc(integer_bytes);
  std::vector<std::int64_t> narrow_acc(integer_bytes);  // a narrow stride is ≤ the padded one
  std::vector<double> wide_acc(wide_lanes);
  std::vector<std::int64_t> integer_sums(comparisons_.size());
  std::vector<double> sums(comparisons_.size());
  const bool pooled = aggregate_ == Aggregate::pooled;
  for (std::uint32_t b = begin; b < end; ++b) {
    std::fill(integer_sums.begin(), integer_sums.end(), 0);
    std::fill(sums.begin(), sums.end(), 0.0);
    for (std::size_t s = 0; s < strata_.size(); ++s) {
      const StratumLanes& lanes = lanes_[s];
      if (lanes.integer_comparisons.empty() && lanes.wide_comparisons.empty()) continue;
      const std::uint32_t size = strata_[s].size;
      draw_resample_indices(seed, strata_[s].id, b, RandomPurpose::bootstrap_index, size,
                            indices.data());
      const std::uint32_t* idx = indices.data();
      add_lanes(idx, size, lanes.integer_narrow ? 0 : lanes.integer_bytes,
                lanes.integer_rows.data(), lanes.integer_stride, integer_acc.data(),
                lanes.wide_rows.data(), lanes.wide_narrow ? 0 : lanes.wide_stride, wide_acc.data());
      if (lanes.integer_narrow) {  // few lanes: a scalar loop over unpadded int8 rows
        const std::size_t count = lanes.integer_comparisons.size();
        std::fill_n(narrow_acc.begin(), count, 0);
        for (std::uint32_t i = 0; i < size; ++i) {
          const auto* row = reinterpret_cast<const std::int8_t*>(lanes.integer_rows.data()) +
                            static_cast<std::size_t>(idx[i]) * count;
          for (std::size_t k = 0; k < count; ++k) narrow_acc[k] += row[k];
        }
      }
      if (lanes.wide_narrow) {
        const std::size_t count = lanes.wide_comparisons.size();
        std::fill_n(wide_acc.begin(), count, 0.0);
        for (std::uint32_t i = 0; i < size; ++i) {
          const double* row = lanes.wide_rows.data() + static_cast<std::size_t>(idx[i]) * count;
          for (std::size_t k = 0; k < count; ++k) wide_acc[k] += row[k];
        }
      }
      for (std::size_t k = 0; k < lanes.integer_comparisons.size(); ++k) {
        const std::uint32_t c = lanes.integer_comparisons[k];
        const std::int64_t sum = lanes.integer_narrow
                                     ? narrow_acc[k]
                                     : load_signed_lane(integer_acc.data(), k, lanes.integer_bytes);
        if (pooled) {
          integer_sums[c] += sum;
        } else {
          sums[c] += static_cast<double>(sum) / size;
        }
      }
      for (std::size_t k = 0; k < lanes.wide_comparisons.size(); ++k) {
        const std::uint32_t c = lanes.wide_comparisons[k];
        sums[c] += pooled ? wide_acc[k] : wide_acc[k] / size;
      }
    }
    for (std::size_t c = 0; c < comparisons_.size(); ++c) {
      const Comparison& comparison = comparisons_[c];
      double value = 0;
      if (pooled) {
        const double total = comparison.integer ? static_cast<double>(integer_sums[c]) : sums[c];
        value = total / static_cast<double>(comparison.instances);
      } else {
        value = sums[c] / static_cast<double>(comparison.parts.size());
      }
      out[c][b - out_offset] = value;
    }
  }
}

void BootstrapPlan::replicates(std::uint64_t seed, std::int64_t begin, std::int64_t end,
                               int threads, std::vector<std::vector<double>>& out) const {
  run_replicate_ranges("BootstrapPlan::replicates", begin, end, threads, comparisons_.size(), out,
                       [&](std::uint32_t lo, std::uint32_t hi, std::uint32_t b0) {
                         replicate_range(seed, lo, hi, b0, out);
                       });
}

std::vector<double> BootstrapPlan::jackknife(std::size_t c) const {
  const Comparison& comparison = comparisons_[c];
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(comparison.instances));
  const auto difference = [&](const Part& part, std::uint32_t i) {
    return comparison.integer ? static_cast<double>(comparison.small[part.offset + i])
                              : comparison.wide[part.offset + i];
  };
  if (aggregate_ == Aggregate::pooled) {
    double total = 0;
    for (const Part& part : comparison.parts) total += part.sum;
    const double remaining = static_cast<double>(comparison.instances - 1);
    for (const Part& part : comparison.parts) {
      for (std::uint32_t i = 0; i < part.size; ++i) {
        values.push_back((total - difference(part, i)) / remaining);
      }
    }
  } else {
    double total_of_means = 0;
    for (const Part& part : comparison.parts) total_of_means += part.sum / part.size;
    const auto strata = static_cast<double>(comparison.parts.size());
    for (const Part& part : comparison.parts) {
      const double others = total_of_means - part.sum / part.size;
      for (std::uint32_t i = 0; i < part.size; ++i) {
        values.push_back((others + (part.sum - difference(part, i)) / (part.size - 1)) / strata);
      }
    }
  }
  return values;
}

BootstrapResult BootstrapPlan::summarize(std::size_t c, std::vector<double> replicates,
                                         std::int64_t at_or_below_zero,
                                         const BootstrapOptions& options) const {
  const Comparison& comparison = comparisons_[c];
  BootstrapResult result;
  result.name = comparison.name;
  result.aggregate = aggregate_;
  result.instances = comparison.instances;
  result.strata = static_cast<std::int64_t>(comparison.parts.size());
  result.mean_a = comparison.mean_a;
  result.mean_b = comparison.mean_b;
  result.estimate = comparison.estimate;
  result.exact_integer = comparison.integer;
  std::string bca_precheck;
  if (options.bca) {
    const bool one_distinct_difference = [&] {
      const bool small = comparison.integer;
      const std::size_t n = small ? comparison.small.size() : comparison.wide.size();
      for (std::size_t i = 1; i < n; ++i) {
        if (small ? comparison.small[i] != comparison.small[0]
                  : comparison.wide[i] != comparison.wide[0]) {
          return false;
        }
      }
      return true;
    }();
    const bool macro_singleton = aggregate_ == Aggregate::macro &&
                                 std::any_of(comparison.parts.begin(), comparison.parts.end(),
                                             [](const Part& part) { return part.size < 2; });
    if (one_distinct_difference) {
      bca_precheck = "BCa undefined: every paired difference is equal";
    } else if (comparison.instances < 2 || macro_singleton) {
      bca_precheck = "BCa undefined: the jackknife needs 2 or more instances per stratum";
    }
  }
  finish_bootstrap_result(result, std::move(replicates), at_or_below_zero, options, bca_precheck,
                          [&] { return jackknife(c); });
  return result;
}

void finish_bootstrap_result(BootstrapResult& result, std::vector<double> replicates,
                             std::int64_t at_or_below_zero, const BootstrapOptions& options,
                             const std::string& bca_precheck,
                             const std::function<std::vector<double>()>& jackknife) {
  result.confidence = options.confidence;
  result.resamples = static_cast<std::int64_t>(replicates.size());
  result.seed = options.seed;
  result.replicate_hash = replicate_hash(replicates);
  result.at_or_below_zero = at_or_below_zero;
  result.p_value = (1.0 + static_cast<double>(at_or_below_zero)) /
                   (static_cast<double>(replicates.size()) + 1.0);

  // Without keep_replicates the b-order vector is not needed after the hash: sort it in place.
  std::vector<double> sorted = options.keep_replicates ? replicates : std::move(replicates);
  sort_replicates(sorted);
  const double alpha = 1.0 - options.confidence;
  result.lower = quantile_type7(sorted, alpha / 2);
  result.upper = quantile_type7(sorted, 1.0 - alpha / 2);

  if (options.bca) {
    // BCa (Efron 1987): z0 from the share of replicates below the estimate, a from the jackknife.
    const auto below = static_cast<std::int64_t>(
        std::lower_bound(sorted.begin(), sorted.end(), result.estimate) - sorted.begin());
    if (!bca_precheck.empty()) {
      result.bca_unavailable = bca_precheck;
    } else if (below == 0 || below == result.resamples) {
      result.bca_unavailable =
          "BCa undefined: every replicate lies on one side of the estimate (bias correction "
          "infinite)";
    } else {
      const std::vector<double> jack = jackknife();
      double mean = 0;
      for (double v : jack) mean += v;
      mean /= static_cast<double>(jack.size());
      double squares = 0;
      double cubes = 0;
      for (double v : jack) {
        const double u = mean - v;
        squares += u * u;
        cubes += u * u * u;
      }
      if (squares == 0) {
        result.bca_unavailable = "BCa undefined: the jackknife variance is 0";
      } else {
        const boost::math::normal_distribution<double> normal;
        BcaInterval bca;
        bca.acceleration = cubes / (6.0 * std::pow(squares, 1.5));
        bca.bias_correction = boost::math::quantile(
            normal, static_cast<double>(below) / static_cast<double>(result.resamples));
        const auto adjusted = [&](double level) -> double {
          const double z = bca.bias_correction + boost::math::quantile(normal, level);
          const double denominator = 1.0 - bca.acceleration * z;
          if (!(denominator > 0)) return std::nan("");
          return boost::math::cdf(normal, bca.bias_correction + z / denominator);
        };
        const double low = adjusted(alpha / 2);
        const double high = adjusted(1.0 - alpha / 2);
        if (std::isnan(low) || std::isnan(high)) {
          result.bca_unavailable = "BCa undefined: the acceleration is too large for this level";
        } else {
          bca.lower = quantile_type7(sorted, low);
          bca.upper = quantile_type7(sorted, high);
          result.bca = bca;
        }
      }
    }
  }
  if (options.keep_replicates) result.replicates = std::move(replicates);
  if (options.keep_sorted_replicates) result.sorted_replicates = std::move(sorted);
}

void run_replicate_ranges(
    const char* plan, std::int64_t begin, std::int64_t end, int threads, std::size_t comparisons,
    std::vector<std::vector<double>>& out,
    const std::function<void(std::uint32_t, std::uint32_t, std::uint32_t)>& range) {
  if (begin < 0 || end < begin || static_cast<std::uint64_t>(end) > kMaxReplicates) {
    throw InternalError(std::string(plan) + ": bad replicate range [" + std::to_string(begin) +
                        ", " + std::to_string(end) + ")");
  }
  if (threads < 1) throw InternalError(std::string(plan) + ": threads must be >= 1");
  const auto b0 = static_cast<std::uint32_t>(begin);
  const auto length = static_cast<std::uint32_t>(end - begin);
  out.assign(comparisons, std::vector<double>(length));
  for_each_contiguous(length, threads, [&](std::size_t lo, std::size_t hi) {
    range(b0 + static_cast<std::uint32_t>(lo), b0 + static_cast<std::uint32_t>(hi), b0);
  });
}

}  // namespace kvaudit::stats
