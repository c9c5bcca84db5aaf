// Listing, fingerprinting and comparing the files a study reads (see input_fingerprints.h).
#include "suite/manifest/input_fingerprints.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "methods/catalog.h"
#include "suite/manifest/method_configs.h"

namespace kvaudit::manifest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

fs::path absolute_of(const Manifest& m, const std::string& path) {
  return fs::absolute(m.resolve(path)).lexically_normal();
}

// Adds root/name when it is a regular file.
void add_if_file(std::vector<InputFile>& out, const std::string& input, const fs::path& root,
                 const std::string& name) {
  if (is_file(root / name)) out.push_back({input, name, root / name});
}

// The tokenizer-side files model::load_tokenizer reads from an HF directory (tokenizer.json wins
// over tokenizer.model; tokenizer_config.json and generation_config.json refine a tokenizer.json).
void add_tokenizer_files(std::vector<InputFile>& out, const std::string& input,
                         const fs::path& dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                           "generation_config.json", "chat_template.jinja"})
    add_if_file(out, input, dir, name);
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(p.string() + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shard files model.safetensors.index.json maps tensors to, in first-use order.
std::vector<std::string> index_shards(const fs::path& index) {
  json j;
  try {
    j = json::parse(read_small_file(index));
  } catch (const json::parse_error& e) {
    throw InputError(index.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw InputError(index.string() + ": field 'weight_map' is missing or not an object");
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [tensor, shard] : j["weight_map"].items()) {
    if (!shard.is_string())
      throw InputError(index.string() + ": field 'weight_map." + tensor + "' is not a string");
    const std::string name = shard.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos || name.find("..") != std::string::npos)
      throw InputError(index.string() + ": field 'weight_map." + tensor + "': shard file name '" +
                       name + "' must be a plain file name inside the directory");
    if (seen.insert(name).second) shards.push_back(name);
  }
  return shards;
}

void add_model_files(std::vector<InputFile>& out, const Manifest& m, const Model& model) {
  const std::string input = "models." + model.name + ".path";
  const fs::path p = absolute_of(m, model.path);
  if (is_file(p)) {  // a .gguf file: weights, config and tokenizer in one
    out.push_back({input, p.filename().string(), p});
    return;
  }
  if (!is_dir(p)) return;
  add_if_file(out, input, p, "config.json");
  add_tokenizer_files(out, input, p);
  if (is_file(p / "model.safetensors.index.json")) {  // the index wins over model.safetensors
    add_if_file(out, input, p, "model.safetensors.index.json");
    for (const auto& shard : index_shards(p / "model.safetensors.index.json"))
      add_if_file(out, input, p, shard);
  } else {
    add_if_file(out, input, p, "model.safetensors");
  }
}

// A benchmark path that names one file (essay, squad, hotpotqa).
void add_data_file(std::vector<InputFile>& out, const Manifest& m, const Benchmark& b,
                   const char* key, const std::string& value) {
  if (value.empty() || (std::string(key) == "essay" && value == "builtin")) return;
  const fs::path p = absolute_of(m, value);
  if (is_file(p)) out.push_back({"benchmarks." + b.name + "." + key, p.filename().string(), p});
}

void add_generation_tokenizer(std::vector<InputFile>& out, const Manifest& m, const Benchmark& b) {
  if (b.generation_tokenizer.empty()) return;
  const std::string input = "benchmarks." + b.name + ".generation_tokenizer";
  const fs::path p = absolute_of(m, b.generation_tokenizer);
  if (is_dir(p)) {
    add_tokenizer_files(out, input, p);
  } else if (is_file(p)) {
    out.push_back({input, p.filename().string(), p});
    // A tokenizer.json file is refined by the configs beside it (model::load_tokenizer).
    if (p.extension() == ".json")
      for (const char* name : {"tokenizer_config.json", "generation_config.json"})
        if (p.filename() != name) add_if_file(out, input, p.parent_path(), name);
  }
}

std::string key_of(const std::string& input, const std::string& file) {
  return input + "\n" + file;
}

}  // namespace

std::vector<InputFile> list_input_files(const Manifest& m) {
  std::vector<InputFile> out;
  for (const Model& model : m.models) add_model_files(out, m, model);
  for (const Benchmark& b : m.benchmarks) {
    add_data_file(out, m, b, "essay", b.essay);
    add_data_file(out, m, b, "squad", b.squad);
    add_data_file(out, m, b, "hotpotqa", b.hotpotqa);
    add_generation_tokenizer(out, m, b);
    if (!b.data_dir.empty()) {
      const fs::path dir = absolute_of(m, b.data_dir);
      for (const auto& task : b.tasks)
        add_if_file(out, "benchmarks." + b.name + ".data_dir", dir, task + ".jsonl");
    }
  }
  // Files method configs name (methods::ParamType::path: learned artefacts, head scores).
  for (const MethodFileParameter& f : method_file_parameters(m)) {
    const std::string field = "methods." + f.config->name + "." + f.param->name;
    for (const std::string& member : f.param->directory_files)  // a directory parameter's files
      add_if_file(out, field, f.file, member);
    if (is_file(f.file)) out.push_back({field, f.file.filename().string(), f.file});
  }
  return out;
}

std::vector<InputFingerprint> fingerprint_inputs(const Manifest& m, std::ostream* progress) {
  const auto files = list_input_files(m);
  if (progress) {
    std::uintmax_t total = 0;
    for (const auto& f : files) {
      std::error_code ec;
      const auto size = fs::file_size(f.path, ec);
      if (!ec) total += size;
    }
    *progress << "fingerprinting " << files.size() << " input file(s), "
              << (total + (1u << 20) - 1) / (1u << 20) << " MiB (SHA-256) ..." << std::endl;
  }
  std::map<fs::path, FileFingerprint> done;
  std::vector<InputFingerprint> out;
  for (const auto& f : files) {
    auto it = done.find(f.path);
    if (it == done.end()) it = done.emplace(f.path, fingerprint_file(f.path)).first;
    out.push_back({f, it->second});
  }
  return out;
}

json inputs_json(const std::vector<InputFingerprint>& inputs) {
  json out = json::array();
  for (const auto& i : inputs)
    out.push_back(json{{"input", i.where.input},
                       {"file", i.where.file},
                       {"path", i.where.path.string()},
                       {"bytes", i.print.bytes},
                       {"sha256", i.print.sha256}});
  return out;
}

void require_same_inputs(const json& lock, const fs::path& lock_file, const Manifest& m,
                         AbsentInput absent, const std::string& consequence, std::ostream& notes) {
  if (!lock.contains("inputs")) {
    require_same_inputs(lock, lock_file, std::vector<InputFingerprint>{}, absent, consequence,
                        notes);
    return;
  }
  require_same_inputs(lock, lock_file, fingerprint_inputs(m, nullptr), absent, consequence, notes);
}

void require_same_inputs(const json& lock, const fs::path& lock_file,
                         const std::vector<InputFingerprint>& now, AbsentInput absent,
                         const std::string& consequence, std::ostream& notes) {
  if (!lock.contains("inputs")) {
    notes << lock_file.string() << ": note: preregistration schema "
          << lock.value("kvaudit_prereg_schema", 0)
          << " records no fingerprints of the models and data (planned by an older kvaudit); "
             "they are not compared. Plan into a new output directory to lock them.\n";
    return;
  }
  struct Locked {
    std::string input, file, path;
    FileFingerprint print;
  };
  std::map<std::string, Locked> locked;
  for (const auto& e : lock.at("inputs")) {
    Locked l{
        e.at("input").get<std::string>(), e.at("file").get<std::string>(),
        e.at("path").get<std::string>(),
        FileFingerprint{e.at("bytes").get<std::uint64_t>(), e.at("sha256").get<std::string>()}};
    locked.emplace(key_of(l.input, l.file), l);
  }
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const auto& f : now) {
    const std::string key = key_of(f.where.input, f.where.file);
    seen.insert(key);
    const auto it = locked.find(key);
    if (it == locked.end()) {
      problems.push_back(f.where.path.string() + " (" + f.where.input +
                         "): read by the study but not fingerprinted in the lock (the file "
                         "appeared after the study was planned)");
    } else if (f.print != it->second.print) {
      problems.push_back(f.where.path.string() + " (" + f.where.input +
                         "): changed since the study was planned: locked " +
                         describe(it->second.print) + "; now " + describe(f.print));
    }
  }
  for (const auto& [key, l] : locked) {
    if (seen.count(key)) continue;
    if (absent == AbsentInput::refuse) {
      problems.push_back(l.path + " (" + l.input + ", file " + l.file + "): fingerprinted in the " +
                         "lock (" + describe(l.print) + ") but absent now");
    } else {
      notes << lock_file.string() << ": note: " << l.input << " file " << l.file
            << " is absent here (locked at " << l.path << ", " << describe(l.print)
            << "); its fingerprint is not compared (reduce reads only records)\n";
    }
  }
  if (problems.empty()) return;
  std::string message =
      lock_file.string() + ": the study's inputs differ from the preregistration:";
  for (const auto& p : problems) message += "\n  " + p;
  message += "\nThe records would not be those of the planned study; " + consequence +
             ". Restore the files, or plan the changed study into a new output directory.";
  throw InputError(message);
}

}  // namespace kvaudit::manifest
