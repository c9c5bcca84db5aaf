# Unity build of the product libraries (KVAUDIT_UNITY_BUILD, on by default; CMakeLists.txt): CMake
# concatenates each library's sources into batches of 16 (#include of each .cpp in turn), so a file
# shares its translation unit with the files before it in the batch. That is sound only where no
# file's private declarations reach its neighbours. The rules, which tests/lint/check_unity_build.py
# checks on the generated batches (ctest: lint.unity_batches):
#   1. Names at the top level of an anonymous namespace are unique within a library (an overload
#      from a neighbour could be chosen silently). Identical namespace and type aliases may repeat.
#   2. A batched file has no using-directive at namespace scope and undefines the macros it defines.
#   3. Files with functions compiled for another instruction set (__attribute__((target)),
#      target_clones) are compiled alone: functions inlined from a neighbour would be compiled for
#      that set too, where multiply-adds may be fused (FMA), which changes rounding.
# Files with their own compile options (e.g. -ffp-contract) are never batched by CMake.

# Files of `directory` (relative to it) that are compiled one by one, outside the batches.
function(kvaudit_compile_alone directory)
  list(TRANSFORM ARGN PREPEND ${PROJECT_SOURCE_DIR}/${directory}/ OUTPUT_VARIABLE files)
  set_source_files_properties(${files} DIRECTORY ${PROJECT_SOURCE_DIR}/${directory}
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# Rule 3: instruction-set clones.
kvaudit_compile_alone(runners/cpu linear_bf16.cpp attention_math.cpp gemm_tiles.cpp)
kvaudit_compile_alone(statistics rng.cpp bootstrap_plan.cpp)
# Rule 2: `using namespace kvaudit::h5` at namespace scope (its generic names: File, Group, check).
kvaudit_compile_alone(suite/artifacts report_comparison.cpp)
kvaudit_compile_alone(suite/reduce summary_h5.cpp)
