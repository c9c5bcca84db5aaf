// Instruction-set level of the CPU engine; see cpu_isa.h.
#include "runners/cpu/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace kvaudit::cpu {
namespace {

constexpr const char* kVariable = "KVAUDIT_CPU_ISA";

// -1 until the first active_cpu_isa(); then the level.
std::atomic<int> g_active{-1};

CpuIsa lower(CpuIsa a, CpuIsa b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::scalar:
      return "scalar";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx512bf16:
      return "avx512bf16";
  }
  return "scalar";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (const CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512bf16}) {
    if (name == cpu_isa_name(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const CpuIsa detected = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512dq");
    const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
    return bf16 ? CpuIsa::avx512bf16
                : (avx512 ? CpuIsa::avx512 : (avx2 ? CpuIsa::avx2 : CpuIsa::scalar));
  }();
  return detected;
#else
  return CpuIsa::scalar;
#endif
}

std::optional<CpuIsa> requested_cpu_isa() {
  const char* value = std::getenv(kVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::optional<CpuIsa> isa = parse_cpu_isa(value);
  if (!isa) {
    throw std::invalid_argument(std::string(kVariable) + "='" + value +
                                "' is not an instruction-set level (expected scalar, avx2, "
                                "avx512 or avx512bf16, or unset for the CPU's best)");
  }
  return isa;
}

CpuIsa active_cpu_isa() {
  int level = g_active.load(std::memory_order_acquire);
  if (level < 0) {
    const std::optional<CpuIsa> requested = requested_cpu_isa();
    const CpuIsa isa = requested ? lower(*requested, detected_cpu_isa()) : detected_cpu_isa();
    int expected = -1;
    g_active.compare_exchange_strong(expected, static_cast<int>(isa), std::memory_order_acq_rel);
    level = g_active.load(std::memory_order_acquire);
  }
  return static_cast<CpuIsa>(level);
}

std::string describe_active_cpu_isa() {
  const CpuIsa active = active_cpu_isa();
  std::string text(cpu_isa_name(active));
  const std::optional<CpuIsa> requested = requested_cpu_isa();
  if (requested && *requested != active) {
    text +=
        " (" + std::string(kVariable) + "=" + std::string(cpu_isa_name(*requested)) + ", capped)";
  }
  return text;
}

ScopedCpuIsa::ScopedCpuIsa(CpuIsa isa)
    : previous_(active_cpu_isa()), active_(lower(isa, detected_cpu_isa())) {
  g_active.store(static_cast<int>(active_), std::memory_order_release);
}

ScopedCpuIsa::~ScopedCpuIsa() {
  g_active.store(static_cast<int>(previous_), std::memory_order_release);
}

}  // namespace kvaudit::cpu

namespace kvaudit::cpu {

std::string cpu_kernel_provenance() {
  return std::string(kCanonicalOrder) + " (" + describe_active_cpu_isa() + ")";
}

bool same_evaluation_order(std::string_view recorded) {
  return recorded.substr(0, recorded.find(' ')) == kCanonicalOrder;
}

}  // namespace kvaudit::cpu
