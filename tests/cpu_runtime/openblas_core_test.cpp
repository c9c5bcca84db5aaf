// Tests of the OpenBLAS core selection: the override decision, that this process runs a fast core
// (the test main called ensure_fast_openblas_core) and that the library linked is OpenBLAS.
#include "runners/cpu/openblas_core.h"

#include <gtest/gtest.h>

namespace kvaudit::cpu {
namespace {

TEST(OpenBlasCoreTest, RecognisesFastCores) {
  EXPECT_TRUE(is_fast_openblas_core("SkylakeX"));
  EXPECT_TRUE(is_fast_openblas_core("cooperlake"));
  EXPECT_TRUE(is_fast_openblas_core("Haswell"));
  EXPECT_TRUE(is_fast_openblas_core("Zen"));
  EXPECT_FALSE(is_fast_openblas_core("Prescott"));
  EXPECT_FALSE(is_fast_openblas_core("Sandybridge"));
  EXPECT_FALSE(is_fast_openblas_core(""));
}

TEST(OpenBlasCoreTest, OverridesOnlyASlowCoreTheCpuCanBeat) {
  const CpuVectorFeatures avx512{true, true}, avx2{true, false}, old{false, false};
  EXPECT_EQ(openblas_core_override("Prescott", avx512, false), "SkylakeX");
  EXPECT_EQ(openblas_core_override("Prescott", avx2, false), "Haswell");
  EXPECT_EQ(openblas_core_override("Sandybridge", avx2, false), "Haswell");
  EXPECT_EQ(openblas_core_override("Prescott", old, false), std::nullopt);
  EXPECT_EQ(openblas_core_override("Cooperlake", avx512, false), std::nullopt);
  EXPECT_EQ(openblas_core_override("Prescott", avx512, /*user_set_coretype=*/true), std::nullopt);
}

TEST(OpenBlasCoreTest, ThisProcessUsesAFastCoreWhenTheCpuHasOne) {
  const CpuVectorFeatures features = detect_cpu_vector_features();
  const std::string core = openblas_core_name();
  ASSERT_FALSE(core.empty()) << "openblas_get_corename() returned nothing: is this OpenBLAS?";
  if (!features.avx2_fma && !features.avx512) {
    GTEST_SKIP() << "this CPU has neither AVX2+FMA nor AVX-512; OpenBLAS core is " << core;
  }
  EXPECT_TRUE(is_fast_openblas_core(core)) << "OpenBLAS core in use: " << core;
}

}  // namespace
}  // namespace kvaudit::cpu
