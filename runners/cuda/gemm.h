// Linear layers on the GPU through cuBLASLt (bf16 in, fp32 accumulation, bf16 out), the twin of
// cpu::linear (runners/cpu/linear.h): y [rows, out] = x [rows, in] · Wᵀ (+ bias), W row-major
// [out, in] (HF layout); the bias is added in fp32 in the epilogue before the single rounding to
// bf16, as HF's bf16 nn.Linear (and the CPU twin: fp32 product + bias, then one rounding).
//
// In cuBLASLt's column-major terms: Y (out × rows) = Wᵀ·X with W seen as the column-major (in ×
// out) matrix A (transa = T) and X as the column-major (in × rows) matrix B. The call is
// stream-ordered and may be captured into a CUDA graph (its workspace is fixed at construction).
//
// Determinism: the heuristic's first algorithm is chosen once per shape and pinned (cached for the
// Gemm's life), so the same GPU, cuBLAS and build give the same bits run to run. Split-K is allowed
// only with fp32 partials reduced by a separate kernel (kAllowedReductionSchemes): no bf16 partial
// sums and no atomics. plan_descriptions() lists the pinned configuration per shape (logged by
// the GPU checks; tests/device/check.sh keeps them).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "runners/cuda/device_buffer.h"

namespace kvaudit::cuda {

// Split-K reductions a plan may use: in the compute type (fp32) only.
inline constexpr std::uint32_t kAllowedReductionSchemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

// The configuration cuBLASLt chose for one shape (cublasLtMatmulAlgoConfigAttributes_t).
struct GemmAlgorithmConfig {
  int id = 0;
  std::uint32_t tile = 0;
  std::uint32_t stages = 0;
  int split_k = 1;
  std::uint32_t reduction_scheme = 0;
  std::uint32_t cta_swizzling = 0;
  std::uint32_t custom_option = 0;
};

GemmAlgorithmConfig read_algorithm_config(const cublasLtMatmulAlgo_t& algo);
// Whether a split-K configuration's reduction scheme is allowed (NONE always is).
bool reduction_scheme_allowed(std::uint32_t scheme);
// "algo 21 tile 18 stages 8 split-k 1 reduction 0 swizzle 0 custom 0".
std::string describe(const GemmAlgorithmConfig& config);

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

  // One line per shape planned so far, in shape order: "rows=… in=… out=… [+bias]: algo …".
  std::vector<std::string> plan_descriptions() const;

 private:
  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    GemmAlgorithmConfig config;
  };
  const Plan& plan_for(int rows, int in_features, int out_features, bool with_bias);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<std::uint8_t> workspace_;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace kvaudit::cuda
