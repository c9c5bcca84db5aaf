#include "suite/manifest/path_check.h"

#include <filesystem>
#include <fstream>

#include "methods/catalog.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/method_configs.h"

namespace kvaudit::manifest {

std::vector<std::string> check_paths(const Manifest& m) {
  namespace fs = std::filesystem;
  Diagnostics diag(m.file.string());
  for (std::size_t i = 0; i < m.models.size(); ++i) {
    const Model& model = m.models[i];
    const fs::path p = m.resolve(model.path);
    const std::string field = "models." + model.name + ".path";
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      diag.error(model.path_pos, field,
                 "model '" + model.name + "': " + p.string() +
                     " does not exist (set the path to your copy of the model)");
    } else if (model.format == "hf" && !fs::is_regular_file(p / "config.json", ec)) {
      diag.error(model.path_pos, field,
                 "model '" + model.name + "': " + p.string() +
                     " is not a Hugging Face model directory (no config.json)");
    } else if (model.format == "gguf" && !fs::is_regular_file(p, ec)) {
      diag.error(model.path_pos, field,
                 "model '" + model.name + "': " + p.string() + " is not a GGUF file");
    }
  }
  for (const Benchmark& b : m.benchmarks) {
    auto check = [&](const char* key, const std::string& value, bool directory) {
      if (value.empty() || (std::string(key) == "essay" && value == "builtin")) return;
      const fs::path p = m.resolve(value);
      std::error_code ec;
      const bool ok = directory ? fs::is_directory(p, ec) : fs::is_regular_file(p, ec);
      if (!ok) {
        const auto it = b.path_pos.find(key);
        diag.error(it != b.path_pos.end() ? it->second : b.pos, "benchmarks." + b.name + "." + key,
                   p.string() + (fs::exists(p, ec) ? (directory ? " is not a directory"
                                                                : " is not a regular file")
                                                   : " does not exist"));
      }
    };
    check("essay", b.essay, false);
    check("squad", b.squad, false);
    check("hotpotqa", b.hotpotqa, false);
    check("data_dir", b.data_dir, true);
    if (!b.generation_tokenizer.empty()) {
      // What model::load_tokenizer accepts, checked without loading it.
      const fs::path p = m.resolve(b.generation_tokenizer);
      const auto it = b.path_pos.find("generation_tokenizer");
      const SourcePos where = it != b.path_pos.end() ? it->second : b.pos;
      const std::string field = "benchmarks." + b.name + ".generation_tokenizer";
      const std::string ext = p.extension().string();
      std::error_code ec;
      if (!fs::exists(p, ec)) {
        diag.error(where, field, p.string() + " does not exist");
      } else if (fs::is_directory(p, ec)) {
        if (!fs::is_regular_file(p / "tokenizer.json", ec) &&
            !fs::is_regular_file(p / "tokenizer.model", ec))
          diag.error(
              where, field,
              p.string() + " is a directory with neither tokenizer.json nor tokenizer.model");
      } else if (!fs::is_regular_file(p, ec) ||
                 (ext != ".json" && ext != ".model" && ext != ".gguf")) {
        diag.error(where, field,
                   p.string() +
                       " is not a tokenizer (expected an HF model directory, a .json tokenizer, a "
                       ".model SentencePiece file or a .gguf file)");
      }
    }
  }
  // File parameters of method configs (methods::ParamType::path): a readable regular file whose
  // content passes the parameter's check_file.
  for (const MethodFileParameter& f : method_file_parameters(m)) {
    const MethodConfig& cfg = *f.config;
    const methods::ParamSpec& p = *f.param;
    const fs::path& file = f.file;
    const auto at = cfg.param_pos.find(p.name);
    const SourcePos where = at != cfg.param_pos.end() ? at->second : cfg.pos;
    const std::string field = "methods." + cfg.name + "." + p.name;
    std::error_code ec;
    std::string missing_member;  // a directory parameter's file that is not there
    for (const std::string& member : p.directory_files)
      if (missing_member.empty() && !fs::is_regular_file(file / member, ec))
        missing_member = member;
    if (!fs::exists(file, ec)) {
      diag.error(where, field, file.string() + " does not exist");
    } else if (!p.directory_files.empty()) {
      if (!fs::is_directory(file, ec)) {
        diag.error(where, field, file.string() + " is not a directory");
      } else if (!missing_member.empty()) {
        diag.error(where, field, file.string() + " has no " + missing_member);
      } else if (p.check_file) {
        try {
          p.check_file(file.string());
        } catch (const std::exception& e) {
          diag.error(where, field, file.string() + ": " + e.what());
        }
      }
    } else if (!fs::is_regular_file(file, ec)) {
      diag.error(where, field, file.string() + " is not a regular file");
    } else if (!std::ifstream(file, std::ios::binary)) {
      diag.error(where, field, file.string() + " cannot be read");
    } else if (p.check_file) {
      try {
        p.check_file(file.string());
      } catch (const std::exception& e) {
        diag.error(where, field, file.string() + ": " + e.what());
      }
    }
  }
  return diag.lines();
}

}  // namespace kvaudit::manifest
