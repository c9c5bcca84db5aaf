// cuBLASLt linear layers; see gemm.h.
#include "runners/cuda/gemm.h"

#include <stdexcept>
#include <string>

#include "runners/cuda/cuda_check.h"

namespace kvaudit::cuda {
namespace {

// An attribute of the chosen configuration, or `fallback` if cuBLASLt cannot report it (the
// description is for logs; a GEMM must never fail because of it).
template <typename T>
T algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute,
                 T fallback) {
  T value{};
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written) !=
          CUBLAS_STATUS_SUCCESS ||
      written != sizeof value) {
    return fallback;
  }
  return value;
}

}  // namespace

GemmAlgorithmConfig read_algorithm_config(const cublasLtMatmulAlgo_t& algo) {
  GemmAlgorithmConfig c;
  // Unreadable values: -1 / 0xffffffff in the description; split-K then counts as 1 (the
  // preference's reduction mask still holds).
  c.id = algo_attribute<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID, -1);
  c.tile = algo_attribute<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, ~0u);
  c.stages = algo_attribute<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, ~0u);
  c.split_k = algo_attribute<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1);
  c.reduction_scheme =
      algo_attribute<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, ~0u);
  c.cta_swizzling = algo_attribute<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, ~0u);
  c.custom_option = algo_attribute<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, ~0u);
  return c;
}

bool reduction_scheme_allowed(std::uint32_t scheme) {
  return scheme == CUBLASLT_REDUCTION_SCHEME_NONE || (scheme & ~kAllowedReductionSchemes) == 0;
}

std::string describe(const GemmAlgorithmConfig& c) {
  return "algo " + std::to_string(c.id) + " tile " + std::to_string(c.tile) + " stages " +
         std::to_string(c.stages) + " split-k " + std::to_string(c.split_k) + " reduction " +
         std::to_string(c.reduction_scheme) + " swizzle " + std::to_string(c.cta_swizzling) +
         " custom " + std::to_string(c.custom_option);
}

Gemm::Gemm(std::size_t workspace_bytes) : workspace_(workspace_bytes) {
  KVAUDIT_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  for (auto& [shape, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.operation);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::plan_for(int rows, int in_features, int out_features, bool with_bias) {
  const auto key = std::make_tuple(rows, in_features, out_features, with_bias);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;

  Plan plan;
  KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &transpose, sizeof transpose));
  KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                                      &no_transpose, sizeof no_transpose));
  if (with_bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    const cudaDataType_t bias_type = CUDA_R_16BF;
    KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  }
  // A = W as column-major (in × out), used transposed; B = X column-major (in × rows);
  // C = Y column-major (out × rows).
  KVAUDIT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, in_features, out_features, in_features));
  KVAUDIT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, in_features, rows, in_features));
  KVAUDIT_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, out_features, rows, out_features));

  cublasLtMatmulPreference_t preference = nullptr;
  KVAUDIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace_bytes = workspace_.bytes();
  KVAUDIT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof workspace_bytes));
  // Split-K partials only in fp32 (the compute type), summed by a separate reduction in a fixed
  // order: never in bf16 (INPLACE, OUTPUT_TYPE: an extra rounding per partial that the CPU twin
  // does not have). Configurations without split-K use no reduction and are always eligible.
  const std::uint32_t reduction_mask = kAllowedReductionSchemes;
  KVAUDIT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                           &reduction_mask, sizeof reduction_mask));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, plan.operation, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.operation);
    throw CudaError("cuBLASLt found no bf16 GEMM algorithm for rows=" + std::to_string(rows) +
                    " in=" + std::to_string(in_features) + " out=" + std::to_string(out_features) +
                    " (status " + cublasGetStatusName(status) + ")");
  }
  plan.algo = result.algo;
  plan.config = read_algorithm_config(plan.algo);
  if (plan.config.split_k > 1 && plan.config.reduction_scheme != ~0u &&
      !reduction_scheme_allowed(plan.config.reduction_scheme)) {
    const std::string text = describe(plan.config);
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.operation);
    throw CudaError(
        "cuBLASLt returned a split-K algorithm outside the fp32 reduction mask for rows=" +
        std::to_string(rows) + " in=" + std::to_string(in_features) +
        " out=" + std::to_string(out_features) + ": " + text);
  }
  return plans_.emplace(key, plan).first->second;
}

std::vector<std::string> Gemm::plan_descriptions() const {
  std::vector<std::string> lines;
  for (const auto& [shape, plan] : plans_) {
    const auto& [rows, in, out, bias] = shape;
    lines.push_back("rows=" + std::to_string(rows) + " in=" + std::to_string(in) + " out=" +
                    std::to_string(out) + (bias ? " +bias" : "") + ": " + describe(plan.config));
  }
  return lines;
}

void Gemm::linear(const __nv_bfloat16* x, int rows, int in_features, const __nv_bfloat16* weight,
                  int out_features, const __nv_bfloat16* bias, __nv_bfloat16* y,
                  cudaStream_t stream) {
  if (rows <= 0 || in_features <= 0 || out_features <= 0) {
    throw std::invalid_argument(
        "Gemm::linear: sizes must be positive (rows=" + std::to_string(rows) +
        ", in=" + std::to_string(in_features) + ", out=" + std::to_string(out_features) + ")");
  }
  const Plan& plan = plan_for(rows, in_features, out_features, bias != nullptr);
  if (bias != nullptr) {
    KVAUDIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  KVAUDIT_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, weight, plan.a, x, plan.b,
                                      &beta, y, plan.c, y, plan.c, &plan.algo, workspace_.data(),
                                      workspace_.bytes(), stream));
}

}  // namespace kvaudit::cuda
