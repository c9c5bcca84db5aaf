// Counter-based random numbers for the bootstrap: Philox4x32-10 (Salmon, Moraes, Dror & Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11) through Random123's philox.h.
//
// Every bootstrap index is a pure function of (seed, stratum, replicate b, instance i), so any
// split of the replicates over threads or MPI ranks draws exactly the same numbers
// (docs/design/statistics.md §Philox index stream):
//   key     = (seed & 0xffffffff, seed >> 32)                 — the 64-bit run seed
//   counter = (b, ⌊i/2⌋, stratum id, purpose tag)
//   block   = Philox4x32-10(counter, key) = (w0, w1, w2, w3)
//   u64 for even i = (w1 << 32) | w0,  u64 for odd i = (w3 << 32) | w2
//   index   = ⌊u64 · n / 2⁶⁴⌋ (unsigned __int128; bias ≤ n/2⁶⁴, no rejection loop)
// One key per stratum (task) rather than per comparison: every comparison on a task resamples the
// same instances (common random numbers). std::uniform_int_distribution is not used: its algorithm
// differs between standard libraries.
#pragma once

#include <array>
#include <cstdint>

namespace kvaudit::stats {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;
using PhiloxBlock = std::array<std::uint32_t, 4>;

// Purpose tags (counter word 3): different uses of one seed never share a stream.
enum class RandomPurpose : std::uint32_t {
  bootstrap_index = 0x424f4f54u,  // "BOOT": paired-bootstrap instance indices
  simulation = 0x53494d55u,       // "SIMU": test and benchmark data generation
};

// One Philox4x32-10 block (matches Random123's kat_vectors).
PhiloxBlock philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key);

// The key for a 64-bit seed: (low word, high word).
constexpr PhiloxKey philox_key(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed & 0xffffffffu), static_cast<std::uint32_t>(seed >> 32)};
}

__extension__ typedef unsigned __int128 Uint128;  // GCC/Clang extension (-Wpedantic)

// ⌊u · n / 2⁶⁴⌋: maps a uniform 64-bit word to {0, …, n−1}.
constexpr std::uint64_t draw_index(std::uint64_t u, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<Uint128>(u) * n) >> 64);
}

// The two 64-bit words of the block for (seed, replicate, pair = ⌊i/2⌋, stratum, purpose):
// words[0] serves i = 2·pair, words[1] serves i = 2·pair + 1.
std::array<std::uint64_t, 2> philox_words(std::uint64_t seed, std::uint32_t replicate,
                                          std::uint32_t pair, std::uint32_t stratum,
                                          RandomPurpose purpose);

// Fills indices[0..size) with the resample of replicate b of a stratum of `size` instances:
// indices[i] = draw_index(u64(seed, b, i, stratum, purpose), size). Two indices per Philox call.
void draw_resample_indices(std::uint64_t seed, std::uint32_t stratum, std::uint32_t replicate,
                           RandomPurpose purpose, std::uint32_t size, std::uint32_t* indices);

// A uniform double in [0, 1) from a 64-bit word (top 53 bits), for simulations.
constexpr double unit_double(std::uint64_t u) { return static_cast<double>(u >> 11) * 0x1.0p-53; }

}  // namespace kvaudit::stats
