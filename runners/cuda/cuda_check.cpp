// CudaError construction for cuda_check.h.
#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the caller may go on
  throw CudaError(std::string("CUDA error ") + cudaGetErrorName(error) + " (" +
                  cudaGetErrorString(error) + ") in " + call + " at " + file + ":" +
                  std::to_string(line));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError(std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
                  cublasGetStatusString(status) + ") in " + call + " at " + file + ":" +
                  std::to_string(line));
}

}  // namespace kvaudit::cuda
