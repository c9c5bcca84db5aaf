# The CUDA model (included by runners/cuda/CMakeLists.txt): the CUDA backend's
# unit::InferenceEngine (CudaModel, DeviceKvCache, memory plan). It uses the shared layers
# (base/, runners/model, runners/unit, methods/) and never the CPU backend.
add_library(kvaudit_cuda_runtime STATIC
  cuda_model.cpp
  device_kv_cache.cpp
  device_weights.cpp
  gemm.cpp
  memory_planner.cpp
  supported_shapes.cpp
  random_fill.cu)
target_link_libraries(kvaudit_cuda_runtime
  PUBLIC kvaudit_cuda_core kvaudit_cuda_kernels kvaudit_cuda_attention kvaudit_cuda_capture
         kvaudit_base kvaudit_model_numerics kvaudit_unit_runner)
# Bit-exact twins of the CPU backend need IEEE multiply and add, not fused multiply-add.
target_compile_options(kvaudit_cuda_runtime PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>)
