// Encoding throughput on 1 MB of mixed text (English prose, code, digits, CJK, Cyrillic, emoji,
// whitespace runs), printed in MB/s, for the default model's GGUF tokenizer (SmolLM2) when present
// and the Llama-3-shaped golden tokenizer.json (Split regex + NFC + added tokens). The test also
// checks that decode(encode(text)) gives the text back (both are lossless on this NFC text; the
// golden tokenizer's normalized added token "café" would not be, as in HF, so the text avoids it).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "runners/model/tokenizer/tokenizer.h"
#include "runners/model/tokenizer/unicode_nfc.h"

namespace kvaudit::model {
namespace {

const std::filesystem::path kRepository = KVAUDIT_SOURCE_DIR;

std::string mixed_text(std::size_t bytes) {
  const std::vector<std::string> pieces = {
      "The quick brown fox jumps over the lazy dog. ",
      "It's what they'll say, isn't it? ",
      "for (int i = 0; i < n; ++i) {\n    total += values[i] * 2;\n}\n",
      "Order #4521 shipped on 2024-06-01 at 13:45; total $1,299.99. ",
      "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE9\xA6\x96\xE9\x83"
      "\xBD\xE3\x81\xA7\xE3\x81\x99\xE3\x80\x82",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! ",
      "\xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ",
      "\n\n    \t",
      "na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\xBC"
      "ber ",
      "0123456789 3.14159265358979 ",
  };
  std::mt19937 random(12345);
  std::string text;
  while (text.size() < bytes) text += pieces[random() % pieces.size()];
  return text;
}

void measure(const std::filesystem::path& path, const std::string& name) {
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is absent (fetch it with tools/fetch_default_model.sh)";
  }
  const auto tokenizer = load_tokenizer(path);
  const std::string text = to_nfc(mixed_text(1 << 20));
  (void)tokenizer->encode(text.substr(0, 4096));  // load-time work out of the measurement
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer->encode(text, {.add_special_tokens = false});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double megabytes = static_cast<double>(text.size()) / 1e6;
  std::printf("[ throughput ] %s: %.2f MB in %.3f s = %.1f MB/s, %zu tokens (%.2f bytes/token)\n",
              name.c_str(), megabytes, seconds, megabytes / seconds, ids.size(),
              static_cast<double>(text.size()) / static_cast<double>(ids.size()));
  EXPECT_GT(ids.size(), text.size() / 16);
  EXPECT_TRUE(tokenizer->decode(ids) == text) << "decode(encode(text)) differs from the text";
}

TEST(TokenizerThroughput, SmolLm2GgufOnOneMegabyte) {
  measure(kRepository / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
          "SmolLM2 GGUF");
}

TEST(TokenizerThroughput, Llama3ShapedTokenizerJsonOnOneMegabyte) {
  measure(kRepository / "tests/golden/tokenizers/bpe_llama3/tokenizer.json",
          "bpe_llama3 tokenizer.json");
}

}  // namespace
}  // namespace kvaudit::model
