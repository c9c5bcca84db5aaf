// Plan-time checks that the files a manifest names exist: model paths (an HF directory with
// config.json, or a .gguf file), benchmark data files and RULER generation tokenizers (an HF
// directory with tokenizer.json or tokenizer.model, or a .json, .model or .gguf file), and the
// files method configs name (methods::ParamType::path: a readable regular file that passes the
// parameter's check_file, reported at the parameter's position). Parsing
// never touches the file system; these checks run when a study is planned or run.
#pragma once

#include <string>
#include <vector>

#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

// One `file:line:column: field: what is wrong` line per missing or wrong path; empty when all ok.
std::vector<std::string> check_paths(const Manifest& m);

}  // namespace kvaudit::manifest
