// Readers of the learned artefacts some methods take from a file named in the manifest (QFilter,
// ExpectedAttentionStats, DuoAttention; the path parameters of catalog.h). Every failure is an
// std::invalid_argument whose message starts with the file's path and names the field.
//
// safetensors (huggingface/safetensors; what huggingface_hub's PyTorchModelHubMixin.save_pretrained
// writes as model.safetensors, so a hub artefact is read as downloaded):
//   bytes 0..8    N, little-endian u64 header length (8 + N ≤ file size)
//   bytes 8..8+N  a JSON object {"name": {"dtype", "shape": [..], "data_offsets": [begin, end]},
//                 ..., "__metadata__": {...}} (no duplicate names)
//   then          the data buffer, offsets relative to its start, half-open.
// Checked: the header parses, every tensor entry is well formed, shape × element size ==
// end − begin and the range lies inside the buffer (overflow-checked); a requested tensor exists,
// is F32, F16 or BF16 (widened exactly to f32) and every value is finite.
//
// TSV matrix (DuoAttention's attn_patterns/<model>/full_attention_heads.tsv, numpy.savetxt with a
// tab delimiter): one row per line, values separated by tabs (spaces are tolerated), every row
// the same number of values, every value a finite decimal number; blank lines are ignored.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvaudit::methods {

struct ArtefactTensor {
  std::vector<std::int64_t> shape;  // row-major
  std::vector<float> values;        // f32 (exact widening of F16 / BF16)
};

// The named tensors of a safetensors file; throws (path: tensor: problem) when one is missing,
// has another dtype, or holds a non-finite value. The file's other tensors are parsed, not read.
std::map<std::string, ArtefactTensor> read_safetensors_tensors(
    const std::string& path, const std::vector<std::string>& names);

// The whole file (std::invalid_argument "path: cannot open the file" / "path: read error").
std::vector<unsigned char> read_artefact_bytes(const std::string& path);

// The names of the tensors safetensors bytes hold (the header checked as above; no values widened),
// sorted. Methods whose tensor names depend on the model (KVzap's per-layer modules) probe them.
std::vector<std::string> parse_safetensors_names(std::vector<unsigned char> bytes,
                                                 const std::string& source);

// A rectangular matrix of finite numbers from a TSV file: rows × columns, row-major.
struct ArtefactMatrix {
  std::int64_t rows = 0;
  std::int64_t columns = 0;
  std::vector<double> values;
};
ArtefactMatrix read_tsv_matrix(const std::string& path);

// The same two readers over bytes already in memory, `source` naming them in messages (the fuzzing
// entry points, fuzz/fuzz_artefact_files.cpp).
std::map<std::string, ArtefactTensor> parse_safetensors_tensors(
    std::vector<unsigned char> bytes, const std::string& source,
    const std::vector<std::string>& names);
ArtefactMatrix parse_tsv_matrix(const std::string& text, const std::string& source);

// "[2, 4, 16]" for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

// Throws std::invalid_argument("<source>: <what>"), the form of every artefact reader's error.
[[noreturn]] void fail_artefact(const std::string& source, const std::string& what);

// Runs `check` (a reader of the file at `path`) for a plan-time check: an std::invalid_argument's
// leading "<path>: " is removed (the plan writes "manifest:line:col: methods.<config>.<param>:
// <path>: " itself); other exceptions pass unchanged.
template <typename Check>
void check_without_path_prefix(const std::string& path, Check&& check) {
  try {
    check();
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    const std::string prefix = path + ": ";
    if (what.starts_with(prefix)) what.erase(0, prefix.size());
    throw std::invalid_argument(what);
  }
}

// Plan-time content checks of the artefact files (ParamSpec::check_file): the file parses, holds
// the tensors with the expected ranks and mutually consistent shapes, finite values. The model's
// layer/head/head_dim counts are checked by the methods when they see a capture. Their messages
// leave the path out: the plan writes "manifest:line:col: methods.<config>.<param>: <path>: ".
void check_qfilter_file(const std::string& path);
void check_expected_attention_stats_file(const std::string& path);
void check_duo_attention_pattern_file(const std::string& path);

}  // namespace kvaudit::methods
