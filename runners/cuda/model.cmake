# The CUDA model (included by runners/cuda/CMakeLists.txt once kernels/ and attention/ exist).
add_library(kvaudit_cuda_runtime STATIC
  cuda_model.cpp
  device_kv_cache.cpp
  device_weights.cpp
  gemm.cpp
  memory_planner.cpp
  random_fill.cu)
target_link_libraries(kvaudit_cuda_runtime
  PUBLIC kvaudit_cuda_core kvaudit_cuda_kernels kvaudit_cuda_attention kvaudit_cpu_runtime)
# Bit-exact twins of the CPU backend need IEEE multiply and add, not fused multiply-add.
target_compile_options(kvaudit_cuda_runtime PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>)

# The unit runner on the GPU (needs the capture kernels and GPU scorers).
if(TARGET kvaudit_cuda_capture)
  add_library(kvaudit_cuda_unit STATIC cuda_unit_runner.cpp)
  target_link_libraries(kvaudit_cuda_unit
    PUBLIC kvaudit_cuda_runtime kvaudit_cuda_capture kvaudit_unit_runner kvaudit_methods)
endif()
