// The two ways the bootstrap drivers spread work over threads (std::thread; each rethrows the
// first worker's exception after every worker has joined):
//   for_each_parallel       fn(i) for i in [0, n), i strided over the workers (per comparison)
//   for_each_contiguous     fn(lo, hi) over [0, n) cut into one contiguous range per worker (per
//                           replicate range: each replicate computed entirely by one thread, so
//                           the values do not depend on the thread count)
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace kvaudit::stats {

namespace detail {
// Runs body(w) on `workers` threads and rethrows the first exception.
template <typename Body>
void run_workers(std::size_t workers, Body body) {
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(workers);
  for (std::size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      try {
        body(w);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& thread : pool) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

inline std::size_t worker_count(std::size_t n, int threads) {
  return std::min(static_cast<std::size_t>(std::max(threads, 1)), n);
}
}  // namespace detail

template <typename Fn>
void for_each_parallel(std::size_t n, int threads, Fn fn) {
  const std::size_t workers = detail::worker_count(n, threads);
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  detail::run_workers(workers, [&](std::size_t w) {
    for (std::size_t i = w; i < n; i += workers) fn(i);
  });
}

template <typename Fn>
void for_each_contiguous(std::size_t n, int threads, Fn fn) {
  const std::size_t workers = detail::worker_count(n, threads);
  if (workers <= 1) {
    fn(std::size_t{0}, n);
    return;
  }
  detail::run_workers(workers, [&](std::size_t w) { fn(n * w / workers, n * (w + 1) / workers); });
}

}  // namespace kvaudit::stats
