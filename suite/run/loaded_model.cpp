// LoadedModel: see loaded_model.h.
#include "suite/run/loaded_model.h"

#include <algorithm>

#include "base/errors.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/formats/bf16_cast.h"
#include "runners/model/formats/load_weights.h"
#include "suite/run/cuda_engine.h"

namespace kvaudit::run {

namespace {

void add_unique(std::vector<std::int32_t>& ids, std::int32_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

}  // namespace

model::ChatTemplateKind manifest_chat_template(const manifest::Model& m) {
  const std::string where = "models." + m.name + ".chat_template";
  if (m.chat_template == "mistral") {
    return model::parse_chat_template_name("mistral-v3", where);
  }
  return model::parse_chat_template_name(m.chat_template, where);
}

std::string_view end_of_turn_literal(model::ChatTemplateKind kind) {
  switch (kind) {
    case model::ChatTemplateKind::chatml:
    case model::ChatTemplateKind::qwen2:
      return "<|im_end|>";
    case model::ChatTemplateKind::llama3:
      return "<|eot_id|>";
    case model::ChatTemplateKind::mistral_v3:
      return "</s>";
    case model::ChatTemplateKind::deepseek_r1_distill:
      return "<\xEF\xBD\x9C"
             "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
    case model::ChatTemplateKind::none:
      break;
  }
  return {};
}

LoadedModel::LoadedModel(const manifest::Manifest& manifest, std::size_t model_index)
    : index_(model_index) {
  const manifest::Model& m = manifest.models.at(model_index);
  const auto path = manifest.resolve(m.path);
  chat_template_ = manifest_chat_template(m);
  if (m.dtype == "f16") {
    throw InputError("models." + m.name + ".dtype: f16 is not supported (the engines emulate " +
                     "bf16 or compute in f32); use bf16 or f32");
  }
  weights_ = model::load_model_weights(path);
  if (m.dtype == "bf16") {
    if (weights_.config.dtype != model::ComputeDtype::bf16) model::cast_weights_to_bf16(weights_);
  } else {
    weights_.config.dtype = model::ComputeDtype::f32;
  }
  tokenizer_ = model::load_tokenizer(path);
  model::require_tokenizer_fits_model(*tokenizer_, weights_.config.vocab_size,
                                      "models." + m.name + " (" + path.string() + ")");
  if (const auto bos = tokenizer_->bos_id()) {
    if (const auto text = tokenizer_->id_to_token(*bos)) bos_text_ = *text;
  }
  for (const int id : weights_.config.eos_token_ids) add_unique(stop_ids_, id);
  for (const std::int32_t id : tokenizer_->eos_ids()) add_unique(stop_ids_, id);
  const std::string_view end_of_turn = end_of_turn_literal(chat_template_);
  if (!end_of_turn.empty()) {
    if (const auto id = tokenizer_->token_to_id(end_of_turn)) add_unique(stop_ids_, *id);
  }
}

std::size_t LoadedModel::kv_bytes_per_element() const {
  return weights_.config.dtype == model::ComputeDtype::bf16 ? 2 : 4;
}

unit::InferenceEngine& LoadedModel::engine(Device device, AttentionBackend backend) {
  auto& slot = engines_[static_cast<std::size_t>(device)][static_cast<std::size_t>(backend)];
  if (!slot) {
    if (device == Device::cuda) {
      slot = make_cuda_engine(weights_, backend);
    } else {
      slot = std::make_unique<cpu::CpuModel>(weights_, backend);
    }
  }
  return *slot;
}

}  // namespace kvaudit::run
