#include "suite/manifest/instance_split.h"

#include <Random123/philox.h>

#include <numeric>
#include <string>

#include "suite/common/sha256.h"

namespace kvaudit::manifest {
namespace {

// A stream of 32-bit Philox4x32-10 outputs: key = seed, counter = (stream id, block index).
class PhiloxStream {
 public:
  PhiloxStream(std::uint64_t seed, std::uint64_t stream) {
    key_ = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
    ctr_ = {{0, 0, static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  }
  std::uint32_t next() {
    if (used_ == 4) {
      block_ = philox_(ctr_, key_);
      if (++ctr_.v[0] == 0) ++ctr_.v[1];
      used_ = 0;
    }
    return block_.v[used_++];
  }
  // Uniform in [0, bound) by rejection (no modulo bias); bound >= 1.
  std::uint32_t below(std::uint32_t bound) {
    const std::uint32_t limit = static_cast<std::uint32_t>(-bound) % bound;  // 2^32 mod bound
    for (;;) {
      const std::uint32_t x = next();
      if (x >= limit) return x % bound;
    }
  }

 private:
  r123::Philox4x32 philox_;
  r123::Philox4x32::key_type key_;
  r123::Philox4x32::ctr_type ctr_;
  r123::Philox4x32::ctr_type block_{};
  int used_ = 4;
};

}  // namespace

std::vector<std::int64_t> seeded_permutation(std::uint64_t seed, std::string_view stream,
                                             std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), std::int64_t{0});
  PhiloxStream rng(seed, digest_prefix_u64(sha256(stream)));
  for (std::int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    const auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint32_t>(i + 1)));
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  }
  return p;
}

std::vector<Split> split_instances(std::uint64_t seed, std::string_view benchmark,
                                   std::string_view task, std::int64_t instances,
                                   std::int64_t calibration, std::int64_t test) {
  std::vector<Split> out(static_cast<std::size_t>(instances), Split::none);
  const std::string stream = "split/" + std::string(benchmark) + "/" + std::string(task);
  const auto perm = seeded_permutation(seed, stream, instances);
  for (std::int64_t k = 0; k < instances; ++k) {
    const auto idx = static_cast<std::size_t>(perm[static_cast<std::size_t>(k)]);
    if (k < calibration)
      out[idx] = Split::calibration;
    else if (k < calibration + test)
      out[idx] = Split::test;
  }
  return out;
}

}  // namespace kvaudit::manifest
