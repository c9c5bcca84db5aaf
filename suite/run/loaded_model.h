// LoadedModel: one manifest model made ready for units — its weights cast to the manifest's compute
// dtype, its tokenizer, its chat template (the manifest names the family), the ids that end an
// answer, and one inference engine per (device, attention backend), built on first use: a
// cpu::CpuModel, or a CUDA engine on the current GPU (cuda_engine.h). Engines live as long as the
// LoadedModel, so one model's weights are on the GPU at a time.
//
// Compute dtype (docs/MANIFEST.md `dtype`): weights are held as f32 values; `bf16` rounds every
// tensor to bf16 (what transformers does with torch_dtype=bfloat16, and what a GGUF's quantized
// weights become when dequantized "to bf16") and switches the engines to their bf16 rounding
// points; `f32` computes in f32 (a bf16 checkpoint's values are exact in f32; the CPU backend
// only). No engine has f16 numerics, so `f16` is refused with an error naming the model.
//
// Stop ids: the model's EOS ids (config / generation_config and the tokenizer's EOS, EOT, EOM ids)
// plus the chat template's end-of-turn token when the tokenizer has it (<|im_end|> for chatml and
// qwen2, <|eot_id|> for llama3, </s> for mistral-v3, <｜end▁of▁sentence｜> for
// deepseek-r1-distill).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/attention_backend.h"
#include "base/device.h"
#include "runners/model/chat/chat_template.h"
#include "runners/model/model_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/inference_engine.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::run {

// The manifest's chat template name -> the built-in family ("mistral" is mistral-v3). Throws
// InputError naming the model for an unknown name.
model::ChatTemplateKind manifest_chat_template(const manifest::Model& model);

// The end-of-turn literal of a chat template family ("" for none).
std::string_view end_of_turn_literal(model::ChatTemplateKind kind);

class LoadedModel {
 public:
  // Loads the model at manifest.resolve(model.path). Throws (InputError, model::ModelInputError)
  // naming the file when it cannot be read or the dtype cannot be honoured.
  LoadedModel(const manifest::Manifest& manifest, std::size_t model_index);
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  std::size_t index() const { return index_; }
  const model::ModelWeights& weights() const { return weights_; }
  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  model::ChatTemplateKind chat_template() const { return chat_template_; }
  // The tokenizer's BOS text (kvpress prepends it when there is no chat template), or "".
  const std::string& bos_text() const { return bos_text_; }
  const std::vector<std::int32_t>& stop_ids() const { return stop_ids_; }
  // Bytes one K or V element takes at the compute dtype (2 for bf16, 4 for f32).
  std::size_t kv_bytes_per_element() const;
  // The engine of `device` and `backend`, built on first use. The CUDA engine needs a bf16 model
  // and a kvaudit built with CUDA (std::invalid_argument / std::logic_error otherwise).
  unit::InferenceEngine& engine(Device device, AttentionBackend backend);

 private:
  std::size_t index_;
  model::ModelWeights weights_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  model::ChatTemplateKind chat_template_ = model::ChatTemplateKind::none;
  std::string bos_text_;
  std::vector<std::int32_t> stop_ids_;
  // [device][attention backend], indexed by the enums' values.
  std::array<std::array<std::unique_ptr<unit::InferenceEngine>, 2>, 2> engines_;
};

}  // namespace kvaudit::run
