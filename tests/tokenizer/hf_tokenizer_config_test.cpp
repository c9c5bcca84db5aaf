// read_hf_tokenizer_config: the chat_template entry (a string, or the "default" entry of a named
// list) and its clear errors. `kvaudit generate --chat-template auto` reads the template here.
#include "runners/model/tokenizer/hf_tokenizer_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

std::filesystem::path directory_with_config(const std::string& name, const std::string& json) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvaudit-hf-tokenizer-config-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << json;
  return dir;
}

TEST(HfTokenizerConfig, ChatTemplateAsString) {
  const auto dir = directory_with_config("string", R"({"chat_template": "{{ messages }}"})");
  const auto config = read_hf_tokenizer_config(dir);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->chat_template, "{{ messages }}");
  std::filesystem::remove_all(dir);
}

TEST(HfTokenizerConfig, ChatTemplateListUsesTheDefaultEntry) {
  const auto dir =
      directory_with_config("list", R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                     {"name": "default", "template": "D"}]})");
  EXPECT_EQ(read_hf_tokenizer_config(dir)->chat_template, "D");
  std::filesystem::remove_all(dir);
}

TEST(HfTokenizerConfig, NoChatTemplate) {
  const auto dir = directory_with_config("none", R"({"add_bos_token": true})");
  EXPECT_FALSE(read_hf_tokenizer_config(dir)->chat_template.has_value());
  std::filesystem::remove_all(dir);
}

TEST(HfTokenizerConfig, MalformedChatTemplatesNameTheFileAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"chat_template": 3})", "chat_template: expected a string or a list"},
      {R"({"chat_template": [{"name": "x", "template": "T"}]})", "without a \"default\" entry"},
      {R"({"chat_template": [{"name": "default", "template": 1}]})",
       "chat_template[default].template: expected a string"}};
  int i = 0;
  for (const auto& [json, expected] : cases) {
    const auto dir = directory_with_config("bad" + std::to_string(i++), json);
    try {
      (void)read_hf_tokenizer_config(dir);
      ADD_FAILURE() << "accepted " << json;
    } catch (const ModelInputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace kvaudit::model
