# Optimisation levels. Optimised builds (Release -O3, RelWithDebInfo -O2) compile the orchestration
# libraries below at -O1: manifest parsing and planning, the CLI, records, the study runner, the
# benchmark generators and metrics, chat templates, the method catalogue, reduce with its report,
# and artefact bundles. They are most of the build's compiler time (template-heavy parsing and
# formatting code, which -O1 compiles about 40 % faster than -O3) and a negligible part of any run
# (plan and reduce take a second or two of a study; docs/PERFORMANCE.md). The inference engine,
# model loading, tokenizers, the methods, the unit runner and the statistics keep the build type's
# level. -O1 changes no result: the libraries are compiled for baseline x86-64 without fast-math
# (no FMA to contract into), where every floating-point operation rounds as written at any level.
set(KVAUDIT_ORCHESTRATION_LIBRARIES
  kvaudit kvaudit_artifacts kvaudit_benchmarks_catalog kvaudit_chat kvaudit_common
  kvaudit_longbench kvaudit_manifest kvaudit_methods_catalog kvaudit_metrics kvaudit_records
  kvaudit_reduce kvaudit_reduce_sequential kvaudit_ruler kvaudit_run kvaudit_run_sequential)
foreach(library IN LISTS KVAUDIT_ORCHESTRATION_LIBRARIES)
  target_compile_options(${library} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug>>>:-O1>)
endforeach()
