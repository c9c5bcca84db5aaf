// tokenizer_config.json / generation_config.json readers (strict JSON, file + path errors).
#include "runners/model/tokenizer/hf_tokenizer_config.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "runners/model/formats/mapped_file.h"
#include "runners/model/formats/strict_json.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/message_text.h"

namespace kvaudit::model {
namespace {

using nlohmann::json;

json read_json_file(const std::filesystem::path& path) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  return parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

[[noreturn]] void fail_config(const std::string& source, const std::string& path,
                              const std::string& what) {
  throw ModelInputError(source + ": " + path + ": " + what);
}

std::optional<bool> optional_bool(const json& root, const char* key, const std::string& source) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    fail_config(source, key, "expected a boolean, found " + json_type_name(*it));
  return it->get<bool>();
}

// A token name: a string, or an AddedToken object with "content".
std::optional<std::string> optional_token(const json& root, const char* key,
                                          const std::string& source) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
    fail_config(source, std::string(key) + ".content", "expected a string");
  }
  fail_config(source, key,
              "expected a string or an object with \"content\", found " + json_type_name(*it));
}

// chat_template: a string, or a list of {name, template} whose "default" entry is the template.
std::optional<std::string> optional_chat_template(const json& root, const std::string& source) {
  const auto it = root.find("chat_template");
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    fail_config(source, "chat_template",
                "expected a string or a list, found " + json_type_name(*it));
  }
  for (const auto& named : *it) {
    if (named.is_object() && named.value("name", json()) == "default") {
      const auto text = named.find("template");
      if (text == named.end() || !text->is_string()) {
        fail_config(source, "chat_template[default].template", "expected a string");
      }
      return text->get<std::string>();
    }
  }
  fail_config(source, "chat_template", "a list without a \"default\" entry");
}

std::int32_t token_id(const json& value, const std::string& source, const std::string& path) {
  if (!value.is_number_integer())
    fail_config(source, path, "expected an integer, found " + json_type_name(value));
  const bool in_range =
      value.is_number_unsigned()
          ? value.get<std::uint64_t>() <=
                static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())
          : value.get<std::int64_t>() >= 0 &&
                value.get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max();
  if (!in_range) fail_config(source, path, "id " + value.dump() + " is outside [0, 2147483647]");
  return static_cast<std::int32_t>(value.get<std::int64_t>());
}

}  // namespace

std::optional<HfTokenizerConfig> read_hf_tokenizer_config(const std::filesystem::path& directory) {
  const std::filesystem::path path = directory / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const json root = read_json_file(path);
  HfTokenizerConfig config;
  config.source = path.string();
  const std::string& source = config.source;
  if (!root.is_object())
    fail_config(source, "(top level)", "expected an object, found " + json_type_name(root));
  config.add_bos_token = optional_bool(root, "add_bos_token", source);
  config.add_eos_token = optional_bool(root, "add_eos_token", source);
  config.legacy = optional_bool(root, "legacy", source);
  config.add_prefix_space = optional_bool(root, "add_prefix_space", source);
  config.bos_token = optional_token(root, "bos_token", source);
  config.eos_token = optional_token(root, "eos_token", source);
  config.unk_token = optional_token(root, "unk_token", source);
  config.chat_template = optional_chat_template(root, source);
  const auto added = root.find("added_tokens_decoder");
  if (added != root.end() && !added->is_null()) {
    if (!added->is_object()) {
      fail_config(source, "added_tokens_decoder",
                  "expected an object, found " + json_type_name(*added));
    }
    for (auto item = added->begin(); item != added->end(); ++item) {
      const std::string& key = item.key();
      const json& entry = item.value();
      const std::string path_prefix = "added_tokens_decoder." + quote_for_message(key);
      std::int32_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc() || end != key.data() + key.size() || id < 0) {
        fail_config(source, path_prefix, "the key is not a token id");
      }
      if (!entry.is_object())
        fail_config(source, path_prefix, "expected an object, found " + json_type_name(entry));
      AddedToken token;
      token.id = id;
      const auto content = entry.find("content");
      if (content == entry.end() || !content->is_string()) {
        fail_config(source, path_prefix + ".content", "expected a string");
      }
      token.content = content->get<std::string>();
      const auto flag = [&](const char* name, bool fallback) {
        const auto it = entry.find(name);
        if (it == entry.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) {
          fail_config(source, path_prefix + "." + name,
                      "expected a boolean, found " + json_type_name(*it));
        }
        return it->get<bool>();
      };
      token.special = flag("special", false);
      token.lstrip = flag("lstrip", false);
      token.rstrip = flag("rstrip", false);
      token.single_word = flag("single_word", false);
      token.normalized = flag("normalized", !token.special);
      config.added_tokens_decoder.push_back(std::move(token));
    }
    std::sort(config.added_tokens_decoder.begin(), config.added_tokens_decoder.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }
  return config;
}

std::vector<std::int32_t> read_generation_eos_ids(const std::filesystem::path& directory) {
  const std::filesystem::path path = directory / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  const json root = read_json_file(path);
  const std::string source = path.string();
  if (!root.is_object())
    fail_config(source, "(top level)", "expected an object, found " + json_type_name(root));
  const auto it = root.find("eos_token_id");
  if (it == root.end() || it->is_null()) return {};
  std::vector<std::int32_t> ids;
  if (it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      ids.push_back(token_id((*it)[i], source, "eos_token_id[" + std::to_string(i) + "]"));
    }
  } else {
    ids.push_back(token_id(*it, source, "eos_token_id"));
  }
  return ids;
}

}  // namespace kvaudit::model
