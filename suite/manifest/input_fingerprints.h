// The files a study reads, fingerprinted for the preregistration lock (docs/MANIFEST.md §The lock):
// every file each model loads (an HF directory: config.json, generation_config.json, the tokenizer
// files, chat_template.jinja, model.safetensors or model.safetensors.index.json and every shard it
// maps; a GGUF model: the .gguf file) and every data file the benchmarks name (RULER essay, SQuAD,
// HotpotQA, the generation tokenizer's files; LongBench <data_dir>/<task>.jsonl for each task) and
// every file a method config names (methods::ParamType::path, input "methods.<config>.<param>").
// Each file is recorded as (the manifest field naming it, its name relative to that path, size,
// SHA-256). Like path_check.h this is a separate step run by plan, run and reduce, never by the
// parser; the fingerprints are not part of the manifest hash (the manifest is the same study).
//
// `kvaudit plan` writes them into prereg.json ("inputs"); `kvaudit run` recomputes them on rank 0
// and refuses a file that changed, appeared or disappeared; `kvaudit reduce` refuses a file that
// is present and changed, and notes and skips one that is absent (a study can be reduced on a
// machine without its models: reduce reads only records).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "suite/common/file_fingerprint.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

// One file a study reads.
struct InputFile {
  std::string input;  // the manifest field naming it: models.<m>.path, benchmarks.<b>.<key>
  std::string file;   // its name relative to that path (the directory, or a file's parent)
  std::filesystem::path path;  // absolute, resolved against the manifest's directory
};

struct InputFingerprint {
  InputFile where;
  FileFingerprint print;
};

// Every file the manifest's models and benchmarks read that exists now, in manifest order (models
// by name, then benchmarks by name). An input whose path does not exist contributes nothing
// (check_paths reports it at plan and run). InputError for a model.safetensors.index.json that
// cannot be read as a weight map (naming the file and the field).
std::vector<InputFile> list_input_files(const Manifest& m);

// Fingerprints every listed file (a file named by two inputs is read once). `progress`, when
// given, gets one line before the hashing starts (it reads every byte of every model).
std::vector<InputFingerprint> fingerprint_inputs(const Manifest& m, std::ostream* progress);

// The lock's "inputs" array: [{input, file, path, bytes, sha256}, ...].
nlohmann::json inputs_json(const std::vector<InputFingerprint>& inputs);

// What a file the lock fingerprinted but that is absent now means: `refuse` for run (it needs
// every input), `note` for reduce (it reads only records).
enum class AbsentInput { refuse, note };

// Recomputes the fingerprints of the manifest's inputs and compares them with the lock's "inputs"
// (the lock must already be verified, prereg_check.h). InputError (exit 1) naming each file whose
// fingerprint differs (the lock's and the current one), that is read now but was not fingerprinted,
// or (AbsentInput::refuse) that the lock has but is absent now; `consequence` ends the message
// ("nothing was run"). Notes (a schema-1 lock without fingerprints, absent files under
// AbsentInput::note) go to `notes`.
void require_same_inputs(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                         const Manifest& m, AbsentInput absent, const std::string& consequence,
                         std::ostream& notes);
// The same against fingerprints already computed (`now`: fingerprint_inputs of the manifest).
void require_same_inputs(const nlohmann::json& lock, const std::filesystem::path& lock_file,
                         const std::vector<InputFingerprint>& now, AbsentInput absent,
                         const std::string& consequence, std::ostream& notes);

}  // namespace kvaudit::manifest
