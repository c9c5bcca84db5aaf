// Fuzz target: the NumPy .npy reader (methods/npy_file.h; LU-KV's budget curve) on arbitrary
// bytes. Any input must either parse or raise std::invalid_argument; anything else (crash, other
// exception, sanitizer report) is a bug. A parsed array must hold prod(shape) values.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "methods/npy_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::methods;
  const std::vector<unsigned char> bytes(data, data + size);
  try {
    const NpyArray array = parse_npy(bytes, "fuzz");
    std::uint64_t count = 1;
    for (const auto d : array.shape) count *= static_cast<std::uint64_t>(d);
    if (count != array.values.size()) std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
