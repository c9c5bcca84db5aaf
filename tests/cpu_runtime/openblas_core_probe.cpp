// Test helper for the OpenBLAS re-exec mechanism: `openblas_core_probe CORE` re-executes itself
// with OPENBLAS_CORETYPE=CORE (reexec_with_openblas_core) and the re-executed process prints the
// core OpenBLAS then uses as "core=<name> reexecuted=<0|1>". Without arguments it only prints.
#include <cstdlib>
#include <iostream>
#include <string>

#include "runners/cpu/openblas_core.h"

int main(int argc, char** argv) {
  const bool reexecuted = std::getenv("KVAUDIT_OPENBLAS_REEXEC") != nullptr;
  if (argc > 1 && !reexecuted) {
    kvaudit::cpu::reexec_with_openblas_core(argv, argv[1]);
    return 2;  // exec failed
  }
  std::cout << "core=" << kvaudit::cpu::openblas_core_name() << " reexecuted=" << reexecuted
            << "\n";
  return 0;
}
