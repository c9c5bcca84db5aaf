// gtest main of the suite/run tests: selects OpenBLAS's fast kernels first (openblas_core.h), as
// every kvaudit program using the CPU backend does, then runs the tests.
#include <gtest/gtest.h>

#include "runners/cpu/openblas_core.h"

int main(int argc, char** argv) {
  kvaudit::cpu::ensure_fast_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
