// The stratified paired bootstrap's public entry points: one comparison, a batch processed in
// passes, the type-7 quantile and the replicate hash. Procedure in paired_bootstrap.h; the kernel
// is BootstrapPlan (bootstrap_plan.cpp).
#include "statistics/paired_bootstrap.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/errors.h"
#include "statistics/bootstrap_plan.h"

namespace kvaudit::stats {

namespace {}  // namespace

const char* aggregate_name(Aggregate aggregate) {
  return aggregate == Aggregate::pooled ? "pooled" : "macro";
}

BootstrapResult paired_bootstrap(const PairedComparison& comparison,
                                 const BootstrapOptions& options) {
  return paired_bootstrap_batch({comparison}, options).front();
}

std::vector<BootstrapResult> paired_bootstrap_batch(
    const std::vector<PairedComparison>& comparisons, const BootstrapOptions& options) {
  validate_bootstrap_options(options);
  validate_paired_comparisons(comparisons, 0, comparisons.size());
  return bootstrap_batch<BootstrapPlan>(comparisons, options, resolve_threads(options));
}

double quantile_type7(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw InputError("quantile_type7: no values");
  if (!(q >= 0.0 && q <= 1.0)) {
    throw InputError("quantile_type7: q must be in [0, 1], got " + std::to_string(q));
  }
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const double floor_h = std::floor(h);
  const auto k = static_cast<std::size_t>(floor_h);
  if (k + 1 >= sorted.size()) return sorted.back();
  return sorted[k] + (h - floor_h) * (sorted[k + 1] - sorted[k]);
}

namespace {

std::uint64_t bits_of(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Order-preserving key: for non-NaN doubles, a < b ⇔ key(a) < key(b) (−0 sorts before +0).
std::uint64_t order_key(std::uint64_t bits) {
  return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
}

std::uint64_t key_bits(std::uint64_t key) {
  return (key >> 63) != 0 ? key & ~(std::uint64_t{1} << 63) : ~key;
}

// Counts the distinct bit patterns in an open-addressing table of `capacity` (a power of 2) slots;
// false when there are more than capacity / 2. On success, values is rewritten sorted.
bool sort_by_distinct_values(std::vector<double>& values, std::size_t capacity) {
  constexpr std::uint64_t kEmpty = 0xffffffffffffffffull;  // a NaN pattern: never a stored value
  std::vector<std::uint64_t> slot(capacity, kEmpty);
  std::vector<std::uint32_t> count(capacity, 0);
  const std::size_t mask = capacity - 1;
  std::size_t distinct = 0;
  for (double value : values) {
    const std::uint64_t bits = bits_of(value);
    std::size_t h = static_cast<std::size_t>((bits * 0x9e3779b97f4a7c15ull) >> 40) & mask;
    while (slot[h] != bits && slot[h] != kEmpty) h = (h + 1) & mask;
    if (slot[h] == kEmpty) {
      if (++distinct > capacity / 2) return false;
      slot[h] = bits;
    }
    ++count[h];
  }
  std::vector<std::pair<std::uint64_t, std::uint32_t>> keyed;  // (order key, count)
  keyed.reserve(distinct);
  for (std::size_t h = 0; h < capacity; ++h) {
    if (slot[h] != kEmpty) keyed.emplace_back(order_key(slot[h]), count[h]);
  }
  std::sort(keyed.begin(), keyed.end());
  std::size_t out = 0;
  for (const auto& [key, n] : keyed) {
    const std::uint64_t bits = key_bits(key);
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    std::fill_n(values.begin() + static_cast<std::ptrdiff_t>(out), n, value);
    out += n;
  }
  return true;
}

// LSD radix sort on the order keys, 8 bits per pass; passes where every key has the same digit
// are skipped.
void radix_sort(std::vector<double>& values) {
  const std::size_t n = values.size();
  std::vector<std::uint64_t> keys(n);
  std::vector<std::uint64_t> scratch(n);
  std::vector<std::array<std::uint32_t, 256>> histogram(8);
  for (auto& h : histogram) h.fill(0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t key = order_key(bits_of(values[i]));
    keys[i] = key;
    for (int digit = 0; digit < 8; ++digit) ++histogram[digit][(key >> (8 * digit)) & 0xffu];
  }
  for (int digit = 0; digit < 8; ++digit) {
    std::array<std::uint32_t, 256>& h = histogram[digit];
    if (h[(keys[0] >> (8 * digit)) & 0xffu] == n) continue;  // one digit value: order unchanged
    std::uint32_t total = 0;
    for (std::uint32_t& bucket : h) {
      const std::uint32_t c = bucket;
      bucket = total;
      total += c;
    }
    for (std::size_t i = 0; i < n; ++i) scratch[h[(keys[i] >> (8 * digit)) & 0xffu]++] = keys[i];
    keys.swap(scratch);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t bits = key_bits(keys[i]);
    std::memcpy(&values[i], &bits, sizeof bits);
  }
}

}  // namespace

void sort_replicates(std::vector<double>& values) {
  // With a NaN or a −0 present, equal-comparing values need not be identical bits and the
  // arrangement is std::sort's own; elsewhere every correct sort gives the same vector.
  for (double value : values) {
    if (std::isnan(value) || (value == 0.0 && std::signbit(value))) {
      std::sort(values.begin(), values.end());
      return;
    }
  }
  if (values.size() < 64 || values.size() > 0xffffffffu) {
    std::sort(values.begin(), values.end());
    return;
  }
  if (sort_by_distinct_values(values, 4096)) return;
  radix_sort(values);
}

std::uint64_t replicate_hash(const std::vector<double>& values) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (double value : values) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int byte = 0; byte < 8; ++byte) {  // little-endian byte order, whatever the host
      hash ^= (bits >> (8 * byte)) & 0xffu;
      hash *= 0x100000001b3ull;  // FNV prime
    }
  }
  return hash;
}

}  // namespace kvaudit::stats
