// Fixtures shared by the CUDA-model tests: where the golden models are (environment variables
// override the build-time paths, so the same binary runs from a copied tree on a GPU machine), the
// bf16 weights both backends run, and a greedy loop that is the same for both.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/argmax.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cuda/cuda_model.h"
#include "runners/cuda/device_weights.h"
#include "runners/model/formats/load_weights.h"
#include "runners/unit/greedy_decoding.h"
#include "tests/cuda/test_paths.h"

namespace kvaudit::cuda::test {

// The bf16 weights of a model directory or file, loaded once per process (CpuModel keeps a
// reference). GGUF/f32 checkpoints are rounded to bf16: what the GPU holds.
inline const model::ModelWeights& bf16_weights(const std::filesystem::path& path) {
  static std::map<std::string, std::unique_ptr<model::ModelWeights>> loaded;
  auto found = loaded.find(path.string());
  if (found == loaded.end()) {
    found = loaded
                .emplace(path.string(), std::make_unique<model::ModelWeights>(
                                            cast_to_bf16(model::load_model_weights(path))))
                .first;
  }
  return *found->second;
}

// The CPU model options that make it the GPU's twin: the FlashAttention-2 kernel visits keys in
// tiles of 64 (attention/prefill_attention_sdpa.cu), and the bf16 rounding of P depends on the
// running max, so the CPU sdpa uses 64-key blocks too (its default is 256).
inline cpu::CpuModelOptions cpu_twin_options() {
  cpu::CpuModelOptions options;
  options.sdpa_key_block = 64;           // the prefill kernel's key tile (kBlockKeys)
  options.sdpa_decode_one_block = true;  // the decode kernel: one block over every held key
  return options;
}

// Greedy continuation on the CPU backend (unit::generate_greedy).
inline std::vector<std::int32_t> cpu_greedy(cpu::CpuModel& model,
                                            const std::vector<std::int32_t>& prompt, int new_tokens,
                                            const std::vector<int>& eos) {
  cpu::SequenceState state = model.new_sequence();
  const LogitMatrix last = model.prefill(state, prompt, LogitRows::last);
  unit::GreedyOptions options;
  options.max_new_tokens = new_tokens;
  options.eos_token_ids.assign(eos.begin(), eos.end());
  return unit::generate_greedy(model, state, last.row(0), options).tokens;
}

// The same loop on the CUDA model (argmax with torch's tie rule, eos included, last token not fed).
inline std::vector<std::int32_t> cuda_greedy(CudaModel& model,
                                             const std::vector<std::int32_t>& prompt,
                                             int new_tokens, const std::vector<int>& eos) {
  DeviceKvCache cache = model.new_sequence(static_cast<int>(prompt.size()) + new_tokens + 1);
  LogitMatrix logits = model.prefill(cache, prompt, LogitRows::last);
  std::vector<std::int32_t> out;
  for (int step = 0; step < new_tokens; ++step) {
    const std::int32_t token = argmax_token(logits.row(0));
    out.push_back(token);
    bool stop = false;
    for (int e : eos) stop = stop || e == token;
    if (stop || step + 1 == new_tokens) break;
    DeviceKvCache* batch[] = {&cache};
    const std::int32_t tokens[] = {token};
    logits = model.decode_step(batch, tokens);
  }
  return out;
}

}  // namespace kvaudit::cuda::test
