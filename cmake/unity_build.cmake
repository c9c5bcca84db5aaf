# Unity build of the product libraries (KVAUDIT_UNITY_BUILD, on by default; CMakeLists.txt): CMake
# concatenates each library's sources into batches of 16 (#include of each .cpp in turn), so a file
# shares its translation unit with the files before it in the batch. That is sound only where no
# file's private declarations reach its neighbours. The rules, which tools/check_unity_build.py
# checks on the generated batches (ctest: build.unity_batches):
#   1. Names at the top level of an anonymous namespace are unique within a library (an overload
#      from a neighbour could be chosen silently). Identical namespace and type aliases may repeat.
#   2. A batched file has no using-directive at namespace scope and undefines the macros it defines.
#   3. Files with functions compiled for another instruction set (__attribute__((target)),
#      target_clones) are compiled alone: functions inlined from a neighbour would be compiled for
#      that set too, where multiply-adds may be fused (FMA), which changes rounding.
# Files with their own compile options (e.g. -ffp-contract) are never batched by CMake.

# Rule 3: instruction-set clones.
set_source_files_properties(${PROJECT_SOURCE_DIR}/runners/cpu/linear_bf16.cpp ${PROJECT_SOURCE_DIR}/runners/cpu/attention_math.cpp
  DIRECTORY ${PROJECT_SOURCE_DIR}/runners/cpu PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
set_source_files_properties(${PROJECT_SOURCE_DIR}/methods/reconstruction_attention.cpp
  DIRECTORY ${PROJECT_SOURCE_DIR}/methods PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
set_source_files_properties(${PROJECT_SOURCE_DIR}/statistics/rng.cpp ${PROJECT_SOURCE_DIR}/statistics/bootstrap_plan.cpp
  DIRECTORY ${PROJECT_SOURCE_DIR}/statistics PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
# Rule 2: `using namespace kvaudit::h5` at namespace scope (its generic names: File, Group, check).
set_source_files_properties(${PROJECT_SOURCE_DIR}/suite/artifacts/report_comparison.cpp
  DIRECTORY ${PROJECT_SOURCE_DIR}/suite/artifacts PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
set_source_files_properties(${PROJECT_SOURCE_DIR}/suite/reduce/summary_h5.cpp
  DIRECTORY ${PROJECT_SOURCE_DIR}/suite/reduce PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
