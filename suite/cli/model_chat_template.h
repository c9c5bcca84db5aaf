// Where a model keeps its chat template, and which built-in renderer it corresponds to.
//   * a .gguf file: metadata key `tokenizer.chat_template`;
//   * an HF directory: `chat_template.jinja` (transformers ≥ 4.5x writes it), else
//     tokenizer_config.json "chat_template" (a string, or a list of {name, template} whose
//     "default" entry is used).
// The text is never executed: runners/model/chat recognizes it by its markers.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "runners/model/chat/chat_template.h"

namespace kvaudit::cli {

// The model's own template source, or nullopt when it ships none. Throws model::ModelInputError
// for an unreadable or malformed tokenizer_config.json.
std::optional<std::string> read_model_chat_template(const std::filesystem::path& model_path);

// Resolves a --chat-template value: a built-in name, or "auto" (detect from the model's own
// template; a model without one gets `none`; an unrecognized template is an error asking the user
// to name the family).
model::ChatTemplateKind resolve_chat_template(std::string_view requested,
                                              const std::filesystem::path& model_path);

}  // namespace kvaudit::cli
