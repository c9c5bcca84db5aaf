// KVAUDIT_VECTOR_CLONES: marks a hot loop's function to be compiled three times — for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2/FMA) and the baseline — with the version chosen at load time
// (GCC/Clang target_clones), so libraries need no -march and run on every x86-64 machine.
// Elsewhere: nothing.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define KVAUDIT_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVAUDIT_VECTOR_CLONES
#endif
