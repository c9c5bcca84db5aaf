// Argument checks shared by the kernels of this directory (kernels.h, retain_kernels.h):
//  * host side, before any launch: require(condition, function, message) throws
//    std::invalid_argument("<function>: <message>"), so a bad size never reaches the device;
//  * device side, for what only the device knows (lengths, slots and descriptors in device
//    memory): KVAUDIT_DEVICE_REQUIRE prints the failed condition and traps, which aborts the
//    kernel (the error surfaces at the next synchronisation as a launch failure) instead of reading
//    or writing out of bounds.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvaudit::cuda::kernel_checks {

inline void require(bool condition, const char* function, const std::string& message) {
  if (!condition) throw std::invalid_argument(std::string(function) + ": " + message);
}

// Grid-stride launches: enough blocks to cover `count` items, capped (the loop covers the rest).
inline unsigned int grid_for(std::int64_t count, int threads) {
  constexpr std::int64_t kMaxBlocks = 1 << 20;
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace kvaudit::cuda::kernel_checks

#ifdef __CUDACC__
#define KVAUDIT_DEVICE_REQUIRE(condition, message)                                             \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      printf("kvaudit kernel check failed: %s [%s] at %s:%d\n", message, #condition, __FILE__, \
             __LINE__);                                                                        \
      __trap();                                                                                \
    }                                                                                          \
  } while (0)
#endif
