// Top-k selection shared by every method: the k highest scores of one KV head, returned as
// strictly ascending original positions (kept lists are positional; kvpress keeps its gather in
// score order, which attention does not see).
//
// Two tie policies:
//  * top_k_positions / top_k_ranked: the LOWER index wins a tie (NaN ranks above every number) — a
//    simple deterministic policy, used by methods with no torch reference to follow.
//  * torch_top_k_positions / torch_top_k_ranked (the kvpress-parity methods): we reproduce torch's
//    CPU `topk` exactly (ATen TopKImpl.h `topk_impl_loop`), which is what
// kvpress runs on the CPU where the goldens are made. It builds (value, index) pairs in index order
// and, with the comparator "x is NaN and y is not, or x > y" (NaN ranks largest), calls
//   std::partial_sort(q, q + k, q + n)                          if k·64 ≤ n,
//   std::nth_element(q, q + k − 1, q + n), std::sort(q, q + k − 1)   otherwise,
// and returns the first k indices. Neither algorithm is stable, so which of several tied scores
// survives is not "lowest index first" (torch.zeros(100).topk(10) returns 69, 63..68, 72, 74, 73),
// but it is a deterministic function of the input under libstdc++'s introselect/heap-select, which
// our build shares (checked against torch 2.15 in tests/methods/budget_test.cpp and by the kvpress
// parity test). On CUDA torch's topk has no defined tie order (kvpress issue #276); there this is
// simply our documented deterministic policy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvaudit::methods {

// True when score a at position ia ranks before score b at position ib (lower index wins ties).
inline bool ranks_before(float a, std::int64_t ia, float b, std::int64_t ib) {
  const bool a_nan = a != a;
  const bool b_nan = b != b;
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// The positions of the k highest scores (k clamped to [0, scores.size()]), ascending; ties to the
// lower position.
std::vector<std::int32_t> top_k_positions(std::span<const float> scores, std::int64_t k);

// Indices of the k highest scores in rank order (best first; ties to the lower index).
std::vector<std::int64_t> top_k_ranked(std::span<const float> scores, std::int64_t k);

// As torch.topk(scores, k) on the CPU: the positions ascending / the indices in torch's order.
std::vector<std::int32_t> torch_top_k_positions(std::span<const float> scores, std::int64_t k);

// Indices of the k highest scores in torch's returned order (sorted=True: best first, ties in
// torch's order), for wrappers that need the order.
std::vector<std::int64_t> torch_top_k_ranked(std::span<const float> scores, std::int64_t k);

// Sets every position j in [begin, end) of every head to max + 1, where max is over all other
// entries of the layer (kvpress pads protected tokens with `scores.max().item() + 1` computed over
// the whole unpadded layer tensor). `scores` is [heads, length].
void protect_with_max_plus_one(std::span<float> scores, std::int64_t length, std::int64_t begin,
                               std::int64_t end);

}  // namespace kvaudit::methods
