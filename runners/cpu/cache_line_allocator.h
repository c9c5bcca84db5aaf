// std::allocator with 64-byte (cache line, zmm) alignment, for the packed weights of the GEMMs.
#pragma once

#include <cstddef>
#include <new>

namespace kvaudit::cpu::detail {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};

}  // namespace kvaudit::cpu::detail
