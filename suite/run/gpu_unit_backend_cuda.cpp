// make_gpu_unit_backend with CUDA: one CudaModel per (model, attention backend), built on first use
// on the current device from the model's bf16 weights; units go through cuda::run_unit_cuda.
#include <array>
#include <map>
#include <stdexcept>
#include <string>

#include "runners/cuda/cuda_unit_runner.h"
#include "suite/run/gpu_unit_backend.h"

namespace kvaudit::run {
namespace {

class CudaUnitBackend final : public GpuUnitBackend {
 public:
  unit::UnitResult run(LoadedModel& model, std::string_view attention_backend,
                       const unit::UnitTokens& tokens, std::span<const unit::CellSpec> cells,
                       std::span<const methods::MethodConfig* const> method_configs,
                       const unit::UnitRunOptions& options) override {
    const bool eager = attention_backend == "eager";
    if (!eager && attention_backend != "sdpa") {
      throw std::invalid_argument("unknown attention backend '" + std::string(attention_backend) +
                                  "'");
    }
    if (model.weights().config.dtype != model::ComputeDtype::bf16) {
      throw std::invalid_argument("the CUDA backend computes in bf16; this model's dtype is f32");
    }
    if (loaded_index_ != model.index()) {
      models_ = {};  // one model's weights on the GPU at a time
      loaded_index_ = model.index();
    }
    auto& slot = models_[eager ? 0 : 1];
    if (!slot) {
      slot = std::make_unique<cuda::CudaModel>(
          model.weights(), eager ? cpu::AttentionBackend::eager : cpu::AttentionBackend::sdpa);
    }
    std::vector<std::optional<cuda::GpuScorerSpec>> scorers(cells.size());
    for (std::size_t k = 0; k < cells.size() && k < method_configs.size(); ++k) {
      if (method_configs[k] != nullptr) scorers[k] = cuda::gpu_scorer_spec(*method_configs[k]);
    }
    try {
      return cuda::run_unit_cuda(*slot, model.weights(), tokens, cells, options, scorers);
    } catch (const cuda::GpuMemoryError& error) {
      throw std::runtime_error(std::string("GPU memory: ") + error.what());
    }
  }

 private:
  std::size_t loaded_index_ = static_cast<std::size_t>(-1);
  std::array<std::unique_ptr<cuda::CudaModel>, 2> models_;  // eager, sdpa
};

}  // namespace

std::unique_ptr<GpuUnitBackend> make_gpu_unit_backend() {
  return std::make_unique<CudaUnitBackend>();
}

}  // namespace kvaudit::run
