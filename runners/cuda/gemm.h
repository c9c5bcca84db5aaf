// Linear layers on the GPU through cuBLASLt (bf16 in, fp32 accumulation, bf16 out), the twin of
// cpu::linear (runners/cpu/linear.h): y [rows, out] = x [rows, in] · Wᵀ (+ bias), W row-major
// [out, in] (HF layout); the bias is added in fp32 in the epilogue before the single rounding to
// bf16, as HF's bf16 nn.Linear (and the CPU twin: fp32 product + bias, then one rounding).
//
// In cuBLASLt's column-major terms: Y (out × rows) = Wᵀ·X with W seen as the column-major (in ×
// out) matrix A (transa = T) and X as the column-major (in × rows) matrix B. Heuristic results are
// cached per shape; the call is stream-ordered and may be captured into a CUDA graph (its workspace
// is fixed at construction).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "runners/cuda/device_buffer.h"

namespace kvaudit::cuda {

class Gemm {
 public:
  explicit Gemm(std::size_t workspace_bytes = 64u << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // bias: [out] or null. Throws std::invalid_argument for non-positive sizes and CudaError when
  // cuBLASLt finds no algorithm or fails.
  void linear(const __nv_bfloat16* x, int rows, int in_features, const __nv_bfloat16* weight,
              int out_features, const __nv_bfloat16* bias, __nv_bfloat16* y, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan_for(int rows, int in_features, int out_features, bool with_bias);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::uint8_t> workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace kvaudit::cuda
