// Which instruction-set level the CPU engine's kernels dispatch to (docs/design/numerics.md
// §Canonical evaluation order). Every level computes the same bits: the level only changes speed.
//
//   scalar       no vector instructions (std::fma for every multiply-add)
//   avx2         AVX2 + FMA (x86-64-v3: AMD Zen 1-3, Intel Haswell on)
//   avx512       AVX-512 F/BW/VL/DQ (x86-64-v4: Intel Skylake-SP on, AMD Zen 4 on)
//   avx512bf16   the same plus AVX512-BF16 (VDPBF16PS: Cooper Lake, Sapphire Rapids, Zen 4 on)
//
// The active level is the one KVAUDIT_CPU_ISA names (scalar|avx2|avx512|avx512bf16), capped at what
// this CPU executes, or the CPU's best level when the variable is unset or empty. It is read once,
// at the first call of active_cpu_isa(); tests change it with ScopedCpuIsa. AMX is never used (its
// tile state is not enabled on every machine that lists it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::cpu {

enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };

std::string_view cpu_isa_name(CpuIsa isa);
// "scalar", "avx2", "avx512" or "avx512bf16" (exactly); nothing for anything else.
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);

// The best level this CPU executes (CPUID and the OS's saved vector state, as GCC's
// __builtin_cpu_supports reads them).
CpuIsa detected_cpu_isa();

// The level KVAUDIT_CPU_ISA asks for, or nothing when it is unset or empty. Throws
// std::invalid_argument naming the variable, its value and the accepted values when it is not one.
std::optional<CpuIsa> requested_cpu_isa();

// min(requested, detected), or detected when nothing is requested; fixed at the first call (see
// the file comment). Throws as requested_cpu_isa() does.
CpuIsa active_cpu_isa();

// What provenance records: "avx2", or "avx2 (KVAUDIT_CPU_ISA=avx512bf16, capped)" when the request
// exceeded the CPU.
std::string describe_active_cpu_isa();

// Sets the active level for the lifetime of the object (capped at the detected level), then
// restores the previous one. For tests and benchmarks; not thread-safe against a concurrent
// forward pass.
class ScopedCpuIsa {
 public:
  explicit ScopedCpuIsa(CpuIsa isa);
  ~ScopedCpuIsa();
  ScopedCpuIsa(const ScopedCpuIsa&) = delete;
  ScopedCpuIsa& operator=(const ScopedCpuIsa&) = delete;
  CpuIsa active() const { return active_; }

 private:
  CpuIsa previous_;
  CpuIsa active_;
};

}  // namespace kvaudit::cpu

namespace kvaudit::cpu {

// The name of the CPU engine's evaluation order (docs/design/numerics.md §Canonical evaluation
// order); a change to any kernel's order must change it.
inline constexpr std::string_view kCanonicalOrder = "kvaudit-canonical-1";

// What a record's provenance says about the CPU kernels (field blas_core): the order's name and the
// active level, e.g. "kvaudit-canonical-1 (avx2)". Records before the canonical order hold an
// OpenBLAS core name there instead.
std::string cpu_kernel_provenance();

// Whether `recorded` (a provenance blas_core value) names this build's evaluation order: then a
// re-run on any x86-64 CPU, at any level, thread or rank count, must give the same bits.
bool same_evaluation_order(std::string_view recorded);

}  // namespace kvaudit::cpu
