// Making sure OpenBLAS runs its fast kernels.
//
// Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH: when libopenblas is loaded it picks a kernel
// set ("core") from the CPUID, and a CPU newer than the library (e.g. an Intel Xeon with AMX) can
// fall back to a generic SSE3 core (Prescott) that is several times slower for sgemm. The choice is
// made once, in the library's load-time constructor, from the environment variable
// OPENBLAS_CORETYPE; it cannot be changed afterwards.
//
// ensure_fast_openblas_core(argv), called first thing in main(), therefore checks which core
// OpenBLAS chose; if the CPU supports AVX2/AVX-512 but the core is a pre-AVX2 one and the user has
// not set OPENBLAS_CORETYPE, it sets OPENBLAS_CORETYPE (SkylakeX for AVX-512 F/CD/BW/DQ/VL, Haswell
// for AVX2+FMA) and re-executes the program (execv of /proc/self/exe with the same argv), so the
// new process's libopenblas initialises with the fast core. The guard variable
// KVAUDIT_OPENBLAS_REEXEC prevents a second re-exec. If re-executing fails, it warns on stderr
// naming the core and the variable to set. The SapphireRapids core is never chosen (its AMX code
// would SIGILL on CPUs and VMs without AMX); SkylakeX kernels are what sgemm needs. Setting
// OPENBLAS_CORETYPE yourself (e.g. in a Slurm script) avoids the re-exec entirely.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvaudit::cpu {

struct CpuVectorFeatures {
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL (what OpenBLAS's SkylakeX kernels use)
};

CpuVectorFeatures detect_cpu_vector_features();

// The core OpenBLAS is using (openblas_get_corename()), e.g. "Cooperlake", "Haswell", "Prescott".
std::string openblas_core_name();

// Whether `core` is an OpenBLAS core with AVX2 or AVX-512 kernels (case-insensitive).
bool is_fast_openblas_core(std::string_view core);

// The core to force, or nothing: only when the chosen core is not fast, the CPU can run a fast one,
// and OPENBLAS_CORETYPE was not set by the user.
std::optional<std::string> openblas_core_override(std::string_view current_core,
                                                  const CpuVectorFeatures& features,
                                                  bool user_set_coretype);

// Sets OPENBLAS_CORETYPE=core and the guard variable, then execv("/proc/self/exe", argv). Returns
// only if the exec failed (the error is printed to stderr).
void reexec_with_openblas_core(char** argv, const std::string& core);

// See the file comment. Returns the core in use when it returns (the process may be replaced).
std::string ensure_fast_openblas_core(char** argv);

}  // namespace kvaudit::cpu
