// Reading a model's chat template source and resolving --chat-template (model_chat_template.h).
#include "suite/cli/model_chat_template.h"

#include "runners/model/chat/chat_template_detect.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/formats/mapped_file.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/hf_tokenizer_config.h"

namespace kvaudit::cli {

std::optional<std::string> read_model_chat_template(const std::filesystem::path& model_path) {
  if (std::filesystem::is_directory(model_path)) {
    const auto jinja = model_path / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) {
      const model::MappedFile file(jinja);
      const auto bytes = file.bytes();
      return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    const auto config = model::read_hf_tokenizer_config(model_path);
    return config ? config->chat_template : std::nullopt;
  }
  const auto gguf = model::GgufFile::open(model_path);
  return gguf.find_string("tokenizer.chat_template");
}

model::ChatTemplateKind resolve_chat_template(std::string_view requested,
                                              const std::filesystem::path& model_path) {
  if (requested != "auto") {
    return model::parse_chat_template_name(requested, "--chat-template");
  }
  const auto source = read_model_chat_template(model_path);
  if (!source) return model::ChatTemplateKind::none;
  const auto kind = model::detect_chat_template(*source);
  if (!kind) {
    throw model::ModelInputError(
        model_path.string() +
        ": its chat template is not one of the built-in families; name one with "
        "--chat-template (none, llama3, qwen2, mistral-v3, deepseek-r1-distill, chatml)");
  }
  return *kind;
}

}  // namespace kvaudit::cli
