// A test engine: the CPU engine reporting itself as CUDA and forwarding only the primitives every
// InferenceEngine must have, so the optional ones (observed_pass for KVzip's extra pass,
// decode_step_observed for decode-time compression) keep the interface's refusing defaults — as
// the CUDA engine has them today. Tests use it to show that cells needing those features fail
// alone, with the engine's message, while the other cells and the unit carry on. With
// `with_extra_pass` it also forwards observed_pass (so that a cell gets past KVzip's pass and meets
// the next refusal, e.g. RestoreKV's restore pass).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/unit/inference_engine.h"

namespace kvaudit::unit::testing {

class CoreOnlyEngine final : public InferenceEngine {
 public:
  explicit CoreOnlyEngine(cpu::CpuModel& inner, bool with_extra_pass = false)
      : inner_(inner), with_extra_pass_(with_extra_pass) {}
  void observed_pass(SequenceCache& cache, std::span<const std::int32_t> tokens,
                     methods::PassObserver& observer) override {
    if (!with_extra_pass_) return InferenceEngine::observed_pass(cache, tokens, observer);
    inner_.observed_pass(cache, tokens, observer);
  }
  const model::ModelConfig& config() const override { return inner_.config(); }
  std::span<const float> rope_inv_freq() const override { return inner_.rope_inv_freq(); }
  AttentionBackend attention_backend() const override { return inner_.attention_backend(); }
  Device device() const override { return Device::cuda; }
  bool built_from(const model::ModelWeights& w) const override { return inner_.built_from(w); }
  std::unique_ptr<SequenceCache> new_cache(std::int64_t capacity) override {
    return inner_.new_cache(capacity);
  }
  std::unique_ptr<PrefillCapture> new_capture(CaptureOptions options) override {
    return inner_.new_capture(std::move(options));
  }
  LogitMatrix prefill(SequenceCache& cache, std::span<const std::int32_t> tokens, LogitRows rows,
                      PrefillCapture* capture) override {
    return inner_.prefill(cache, tokens, rows, capture);
  }
  std::vector<LogitMatrix> prefill_batch(std::span<SequenceCache* const> caches,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows) override {
    return inner_.prefill_batch(caches, tokens, rows);
  }
  LogitMatrix decode_step(std::span<SequenceCache* const> caches,
                          std::span<const std::int32_t> tokens) override {
    return inner_.decode_step(caches, tokens);
  }
  int max_concurrent_cells(const UnitDemand& demand) override {
    return inner_.max_concurrent_cells(demand);
  }
  bool concurrent_cache_ops() const override { return true; }

 private:
  cpu::CpuModel& inner_;
  bool with_extra_pass_;
};

}  // namespace kvaudit::unit::testing
