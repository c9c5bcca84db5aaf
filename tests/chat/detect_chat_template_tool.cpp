// detect_chat_template_tool FILE...: prints one JSON object per line,
// {"file": FILE, "detected": NAME or null}, for each Jinja template file, using
// kvaudit::model::detect_chat_template. tools/golden/make_chat_golden.py runs it over the real
// templates it fetches and records the answers in tests/golden/chat/chat_golden.json.
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "runners/model/chat/chat_template_detect.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: detect_chat_template_tool FILE...\n";
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "detect_chat_template_tool: cannot open " << argv[i] << "\n";
      return 1;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    nlohmann::json line;
    line["file"] = argv[i];
    const auto kind = kvaudit::model::detect_chat_template(text);
    if (kind) {
      line["detected"] = std::string(kvaudit::model::chat_template_name(*kind));
    } else {
      line["detected"] = nullptr;
    }
    std::cout << line.dump() << "\n";
  }
  return 0;
}
