// Reading a model's chat template source and resolving --chat-template (model_chat_template.h).
#include "suite/cli/model_chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runners/model/chat/chat_template_detect.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/model_error.h"

namespace kvaudit::cli {

namespace {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw model::ModelInputError(path.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<std::string> template_from_tokenizer_config(const std::filesystem::path& file) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw model::ModelInputError(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object() || !config.contains("chat_template")) return std::nullopt;
  const auto& entry = config["chat_template"];
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_array()) {
    for (const auto& named : entry) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
    throw model::ModelInputError(file.string() +
                                 ": chat_template: a list without a \"default\" entry");
  }
  if (entry.is_null()) return std::nullopt;
  throw model::ModelInputError(file.string() + ": chat_template: expected a string or a list");
}

}  // namespace

std::optional<std::string> read_model_chat_template(const std::filesystem::path& model_path) {
  if (std::filesystem::is_directory(model_path)) {
    const auto jinja = model_path / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) return read_text_file(jinja);
    const auto config = model_path / "tokenizer_config.json";
    if (std::filesystem::exists(config)) return template_from_tokenizer_config(config);
    return std::nullopt;
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
