// Detection and forcing of OpenBLAS's fast kernel set; see openblas_core.h.
#include "runners/cpu/openblas_core.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

extern "C" char* openblas_get_corename(void);

namespace kvaudit::cpu {
namespace {

constexpr const char* kGuardVariable = "KVAUDIT_OPENBLAS_REEXEC";

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

}  // namespace

CpuVectorFeatures detect_cpu_vector_features() {
  CpuVectorFeatures features;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  features.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  features.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vl");
#endif
  return features;
}

std::string openblas_core_name() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

bool is_fast_openblas_core(std::string_view core) {
  // OpenBLAS 0.3.21 x86-64 cores with AVX2 (Haswell, Zen) or AVX-512 (the others) kernels.
  static constexpr std::array<std::string_view, 5> fast = {"haswell", "zen", "skylakex",
                                                           "cooperlake", "sapphirerapids"};
  const std::string name = lowercase(core);
  return std::find(fast.begin(), fast.end(), name) != fast.end();
}

std::optional<std::string> openblas_core_override(std::string_view current_core,
                                                  const CpuVectorFeatures& features,
                                                  bool user_set_coretype) {
  if (user_set_coretype || is_fast_openblas_core(current_core)) return std::nullopt;
  if (features.avx512) return std::string("SkylakeX");
  if (features.avx2_fma) return std::string("Haswell");
  return std::nullopt;
}

void reexec_with_openblas_core(char** argv, const std::string& core) {
  if (argv == nullptr || argv[0] == nullptr) {
    std::cerr << "kvaudit: warning: cannot re-execute to select OpenBLAS core " << core
              << " (no argv); set OPENBLAS_CORETYPE=" << core << " before starting the program\n";
    return;
  }
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  ::setenv(kGuardVariable, "1", 1);
  std::cout.flush();
  std::cerr.flush();
  ::execv("/proc/self/exe", argv);
  const int error = errno;
  std::cerr << "kvaudit: warning: re-executing to select OpenBLAS core " << core
            << " failed: " << std::strerror(error) << "; set OPENBLAS_CORETYPE=" << core
            << " before starting the program\n";
}

std::string ensure_fast_openblas_core(char** argv) {
  const std::string current = openblas_core_name();
  const bool user_set = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const bool already_reexecuted = std::getenv(kGuardVariable) != nullptr;
  const CpuVectorFeatures features = detect_cpu_vector_features();
  const std::optional<std::string> wanted =
      openblas_core_override(current, features, user_set && !already_reexecuted);
  if (!wanted) {
    if (!is_fast_openblas_core(current) && (features.avx2_fma || features.avx512)) {
      std::cerr << "kvaudit: warning: OpenBLAS uses its slow '" << current
                << "' kernels on a CPU with AVX2/AVX-512"
                << (user_set ? " (OPENBLAS_CORETYPE is set by the user)" : "") << "\n";
    }
    return current;
  }
  if (already_reexecuted) {
    std::cerr << "kvaudit: warning: OpenBLAS still uses '" << current
              << "' after re-executing with OPENBLAS_CORETYPE=" << *wanted << "\n";
    return current;
  }
  reexec_with_openblas_core(argv, *wanted);
  return current;  // only reached when the exec failed
}

}  // namespace kvaudit::cpu
