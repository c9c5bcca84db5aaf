// Error checking for CUDA runtime and cuBLAS calls: a failing call throws kvaudit::cuda::CudaError
// whose message names the call, the file:line and the runtime's own error name and text. Kernel
// launches are checked with KVAUDIT_CUDA_CHECK_LAUNCH() right after the launch.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kvaudit::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cuda(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

}  // namespace kvaudit::cuda

#define KVAUDIT_CUDA_CHECK(call) ::kvaudit::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define KVAUDIT_CUDA_CHECK_LAUNCH() \
  ::kvaudit::cuda::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
#define KVAUDIT_CUBLAS_CHECK(call) ::kvaudit::cuda::check_cublas((call), #call, __FILE__, __LINE__)
