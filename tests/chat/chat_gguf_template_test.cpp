// The one real template the repository can read at test time: SmolLM2's tokenizer.chat_template in
// the default GGUF (models/ is git-ignored; tools/fetch_default_model.sh fetches it). Its SHA-256
// must be the one the golden generator rendered, the C++ detector must call it chatml, and the
// renderer must reproduce the golden strings recorded for it. Skips with a reason without the file.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runners/model/chat/chat_template.h"
#include "runners/model/chat/chat_template_detect.h"
#include "runners/model/formats/gguf.h"

namespace kvaudit::model {
namespace {

std::string sha256_hex(const std::string& text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  std::string hex;
  constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < size; ++i) {
    hex += kDigits[digest[i] >> 4];
    hex += kDigits[digest[i] & 0x0F];
  }
  return hex;
}

TEST(ChatGgufTemplate, SmolLm2TemplateIsDetectedAsChatml) {
  const std::filesystem::path path = KVAUDIT_DEFAULT_GGUF;
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is absent (models/ is not in git; tools/fetch_default_model.sh "
                 << "fetches it)";
  }
  const GgufFile file = GgufFile::open(path);
  const std::string jinja = file.get_string("tokenizer.chat_template");

  std::ifstream in(KVAUDIT_CHAT_GOLDEN);
  ASSERT_TRUE(in) << KVAUDIT_CHAT_GOLDEN;
  const nlohmann::json golden = nlohmann::json::parse(in);
  EXPECT_EQ(sha256_hex(jinja), golden.at("templates").at("chatml").at("sha256").get<std::string>());
  EXPECT_EQ(detect_chat_template(jinja), ChatTemplateKind::chatml);

  // The default system turn it injects, as the renderer writes it.
  const std::vector<ChatMessage> messages = {{ChatRole::user, "Hi"}};
  const std::string rendered = render_chat(ChatTemplateKind::chatml, messages);
  EXPECT_EQ(rendered.rfind("<|im_start|>system\n" +
                               std::string(default_system_prompt(ChatTemplateKind::chatml)) +
                               "<|im_end|>\n",
                           0),
            0u);
  EXPECT_NE(jinja.find(std::string(default_system_prompt(ChatTemplateKind::chatml))),
            std::string::npos);
}

}  // namespace
}  // namespace kvaudit::model
