// tokenizer_encode_tool TOKENIZER TEXTS.json OUT.json: encodes every string of TEXTS.json (a JSON
// array) with load_tokenizer(TOKENIZER) and writes, per text, {"ids", "ids_without_special",
// "ids_special_as_text", "decoded"} as JSON. Used by tools/golden/check_tokenizer_random.py to
// compare against HF on random text; exits 1 with the message on a ModelInputError.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER TEXTS.json OUT.json\n", argv[0]);
    return 2;
  }
  try {
    const auto tokenizer = kvaudit::model::load_tokenizer(argv[1]);
    std::ifstream in(argv[2]);
    const nlohmann::json texts = nlohmann::json::parse(in);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& text_json : texts) {
      const std::string text = text_json.get<std::string>();
      const auto ids = tokenizer->encode(text, {.add_special_tokens = true, .parse_special = true});
      nlohmann::json row;
      row["ids"] = ids;
      row["ids_without_special"] =
          tokenizer->encode(text, {.add_special_tokens = false, .parse_special = true});
      row["ids_special_as_text"] =
          tokenizer->encode(text, {.add_special_tokens = false, .parse_special = false});
      row["decoded"] = tokenizer->decode(ids, false);
      out.push_back(std::move(row));
    }
    std::ofstream(argv[3]) << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const kvaudit::model::ModelInputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
