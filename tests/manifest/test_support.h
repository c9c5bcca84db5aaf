// Shared helpers for the manifest tests: reading and writing files, fresh temp dirs.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kvaudit::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::filesystem::path source_path(const std::string& rel) {
  return std::filesystem::path(KVAUDIT_SOURCE_DIR) / rel;
}

inline void write_file(const std::filesystem::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write test file " + p.string());
}

// A fresh, empty directory for one test.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(KVAUDIT_TEST_TMP) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A fresh study directory `name` with a stand-in GGUF model (m.gguf, not a real model) and
// study.toml running the one method configuration `config` on one RULER task: its table header
// `[methods.<config>]` is line 19 and `lines` start at line 20.
inline std::filesystem::path one_method_study(const std::string& name, const std::string& config,
                                              const std::string& lines) {
  const std::filesystem::path dir = fresh_dir(name);
  write_file(dir / "m.gguf", "gguf bytes");
  write_file(dir / "study.toml", R"([study]
name = "one-method"
seed = 1
output_dir = "out"

[[models]]
name = "m"
path = "m.gguf"
format = "gguf"
chat_template = "chatml"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = ["niah_single_1"]
length = 1024
instances = 2

[methods.)" + config + "]\n" + lines +
                                     R"(

[[grids]]
name = "g"
benchmarks = ["r"]
methods = [")" + config + R"("]
compression = [0.5]
protocols = ["query-aware"]
attention_backends = ["sdpa"]
)");
  return dir;
}

inline std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  if (pos == std::string::npos) throw std::runtime_error("test fixture lacks: " + from);
  return s.replace(pos, from.size(), to);
}

}  // namespace kvaudit::test
