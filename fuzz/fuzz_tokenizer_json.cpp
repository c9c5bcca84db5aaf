// Fuzz target: the tokenizer.json parser (runners/model/tokenizer/tokenizer_json.h), BpeTokenizer
// construction (validation, PCRE2 compilation of the file's regexes) and encode/decode of a few
// fixed strings plus the input itself. Any input must either load or raise ModelInputError;
// anything else (crash, other exception, sanitizer report, hang) is a bug.
#include <cstdint>
#include <string_view>
#include <vector>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kvaudit::model::BpeTokenizer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const BpeTokenizer tokenizer(kvaudit::model::parse_tokenizer_json(text, "fuzz/tokenizer.json"));
    const std::string_view samples[] = {
        "",
        "Hello world, it's 2024: 1234567 ok?",
        "  <|endoftext|>x<|im_start|>\n\r\n\t caf\xC3\xA9 cafe\xCC\x81 "
        "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
        "<s>[INST] \xE6\x9D\xB1\xE4\xBA\xAC [/INST]</s><mask> [SEP] <sw>",
        text,  // valid UTF-8 whenever the JSON parsed
    };
    for (const std::string_view sample : samples) {
      for (const bool parse_special : {true, false}) {
        const std::vector<std::int32_t> ids =
            tokenizer.encode(sample, {.add_special_tokens = true, .parse_special = parse_special});
        (void)tokenizer.decode(ids, false);
        (void)tokenizer.decode(ids, true);
      }
    }
    const std::vector<std::int32_t> odd_ids = {-1, 0, 1, 255, 256, 1 << 20, 2147483647};
    (void)tokenizer.decode(odd_ids, false);
    (void)tokenizer.token_to_id("he");
    (void)tokenizer.id_to_token(0);
  } catch (const kvaudit::model::ModelInputError&) {
  }
  return 0;
}
