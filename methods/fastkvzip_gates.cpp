// The FastKVzip gates file reader (fastkvzip_gates.h).
#include "methods/fastkvzip_gates.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/artefact_files.h"

namespace kvaudit::methods {
namespace {

constexpr const char* kGateTensors[] = {"q_proj.weight",
                                        "q_proj.bias",
                                        "k_proj.weight",
                                        "q_norm.weight",
                                        "k_norm.weight",
                                        "k_base",
                                        "b"};

// The tensor names of a safetensors header (its JSON text).
std::vector<std::string> names_of_header(const std::string& source, const std::string& header) {
  const nlohmann::json parsed = nlohmann::json::parse(header, nullptr, false);
  if (!parsed.is_object()) fail_artefact(source, "the header is not a JSON object");
  std::vector<std::string> names;
  for (const auto& item : parsed.items())
    if (item.key() != "__metadata__") names.push_back(item.key());
  return names;
}

// The header length of a safetensors file from its first 8 bytes (little-endian u64), checked
// against the file's size.
std::uint64_t header_length(const std::string& source, const unsigned char* size_bytes,
                            std::uint64_t file_size) {
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | size_bytes[i];
  if (header_size > file_size - 8) fail_artefact(source, "the header length exceeds the file");
  return header_size;
}

// The tensor names of a safetensors file (its header only; the tensor reader checks the rest).
std::vector<std::string> safetensors_names(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_artefact(path, "cannot open the file");
  unsigned char size_bytes[8] = {};
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) fail_artefact(path, "shorter than 8 bytes");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  const std::uint64_t header_size = header_length(path, size_bytes, file_size);
  in.seekg(8);
  std::string header(static_cast<std::size_t>(header_size), '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_size)))
    fail_artefact(path, "cannot read the header");
  return names_of_header(path, header);
}

std::vector<std::string> safetensors_names(const std::string& source,
                                           const std::vector<unsigned char>& bytes) {
  if (bytes.size() < 8) fail_artefact(source, "shorter than 8 bytes");
  const std::uint64_t header_size = header_length(source, bytes.data(), bytes.size());
  return names_of_header(
      source,
      std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size)));
}

// Layer i of "i.<tensor>" names, or -1 for any other name.
int gate_layer_of(const std::string& name) {
  const std::size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 6) return -1;
  int layer = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    layer = layer * 10 + (name[i] - '0');
  }
  if (dot > 1 && name[0] == '0') return -1;  // "01." is not layer 1
  return layer;
}

void require_gate_shape(const std::string& path, const std::string& name, const ArtefactTensor& t,
                        const std::vector<std::int64_t>& want, const std::string& meaning) {
  if (t.shape != want)
    fail_artefact(path, name + " has shape " + shape_text(t.shape) + ", expected " +
                            shape_text(want) + " (" + meaning + ")");
}

FastKvzipGate gate_of(const std::string& path, int layer,
                      const std::map<std::string, ArtefactTensor>& tensors) {
  const std::string prefix = std::to_string(layer) + ".";
  const auto get = [&](const char* name) -> const ArtefactTensor& {
    return tensors.at(prefix + name);
  };
  const ArtefactTensor& q_proj = get("q_proj.weight");
  const ArtefactTensor& k_proj = get("k_proj.weight");
  const ArtefactTensor& q_norm = get("q_norm.weight");
  const ArtefactTensor& k_base = get("k_base");
  if (q_norm.shape.size() != 1 || q_norm.shape[0] < 1)
    fail_artefact(path, prefix + "q_norm.weight has shape " + shape_text(q_norm.shape) +
                            ", expected [output_dim]");
  const std::int64_t o = q_norm.shape[0];
  if (k_proj.shape.size() != 2 || k_proj.shape[0] < o || k_proj.shape[0] % o != 0 ||
      k_proj.shape[1] < 1)
    fail_artefact(path, prefix + "k_proj.weight has shape " + shape_text(k_proj.shape) +
                            ", expected [KV heads·" + std::to_string(o) + ", hidden]");
  const std::int64_t kv_heads = k_proj.shape[0] / o;
  const std::int64_t hidden = k_proj.shape[1];
  if (q_proj.shape.size() != 2 || q_proj.shape[1] != hidden || q_proj.shape[0] < o * kv_heads ||
      q_proj.shape[0] % (o * kv_heads) != 0)
    fail_artefact(path, prefix + "q_proj.weight has shape " + shape_text(q_proj.shape) +
                            ", expected [" + std::to_string(kv_heads * o) + "·groups, " +
                            std::to_string(hidden) + "]");
  const std::int64_t groups = q_proj.shape[0] / (o * kv_heads);
  if (k_base.shape.size() != 4 || k_base.shape[0] != kv_heads || k_base.shape[1] != 1 ||
      k_base.shape[3] != o)
    fail_artefact(path, prefix + "k_base has shape " + shape_text(k_base.shape) + ", expected [" +
                            std::to_string(kv_heads) + ", 1, sinks, " + std::to_string(o) + "]");
  require_gate_shape(path, prefix + "q_proj.bias", get("q_proj.bias"), {q_proj.shape[0]},
                     "[KV heads·groups·output_dim]");
  require_gate_shape(path, prefix + "k_norm.weight", get("k_norm.weight"), {o}, "[output_dim]");
  require_gate_shape(path, prefix + "b", get("b"), {kv_heads, 1, groups}, "[KV heads, 1, groups]");

  FastKvzipGate gate;
  gate.kv_heads = static_cast<int>(kv_heads);
  gate.groups = static_cast<int>(groups);
  gate.output_dim = static_cast<int>(o);
  gate.sinks = static_cast<int>(k_base.shape[2]);
  gate.input_dim = static_cast<int>(hidden);
  gate.q_weight = q_proj.values;
  gate.q_bias = get("q_proj.bias").values;
  gate.k_weight = k_proj.values;
  gate.q_norm = q_norm.values;
  gate.k_norm = get("k_norm.weight").values;
  gate.k_base = k_base.values;
  gate.bias = get("b").values;
  return gate;
}

// The gates from the file's tensor names and a reader of the named tensors; `path` names the
// file in messages.
template <typename ReadTensors>
std::vector<FastKvzipGate> gates_from(const std::string& path,
                                      const std::vector<std::string>& names,
                                      ReadTensors read_tensors) {
  std::set<int> layers;
  for (const std::string& name : names) {
    const int layer = gate_layer_of(name);
    if (layer >= 0) layers.insert(layer);
  }
  if (layers.empty())
    fail_artefact(path,
                  "holds no gate tensors (expected \"0.q_proj.weight\", \"0.k_proj.weight\", ...)");
  const int n_layers = *layers.rbegin() + 1;
  if (static_cast<int>(layers.size()) != n_layers)
    fail_artefact(path, "the gate layers are not numbered 0.." + std::to_string(n_layers - 1));
  std::vector<std::string> wanted;
  for (int layer = 0; layer < n_layers; ++layer)
    for (const char* tensor : kGateTensors) wanted.push_back(std::to_string(layer) + "." + tensor);
  const std::map<std::string, ArtefactTensor> tensors = read_tensors(wanted);
  std::vector<FastKvzipGate> gates;
  for (int layer = 0; layer < n_layers; ++layer) {
    gates.push_back(gate_of(path, layer, tensors));
    const FastKvzipGate& g = gates.back();
    const FastKvzipGate& first = gates.front();
    if (g.kv_heads != first.kv_heads || g.groups != first.groups ||
        g.output_dim != first.output_dim || g.sinks != first.sinks ||
        g.input_dim != first.input_dim)
      fail_artefact(
          path, "the gate of layer " + std::to_string(layer) +
                    " has another shape than layer 0's (kvpress builds every gate with layer 0's)");
  }
  return gates;
}

}  // namespace

std::vector<FastKvzipGate> read_fastkvzip_gates(const std::string& path) {
  return gates_from(path, safetensors_names(path), [&](const std::vector<std::string>& wanted) {
    return read_safetensors_tensors(path, wanted);
  });
}

std::vector<FastKvzipGate> parse_fastkvzip_gates(const std::vector<unsigned char>& bytes,
                                                 const std::string& source) {
  return gates_from(source, safetensors_names(source, bytes),
                    [&](const std::vector<std::string>& wanted) {
                      return parse_safetensors_tensors(bytes, source, wanted);
                    });
}

void check_fastkvzip_gates_file(const std::string& path) {
  check_without_path_prefix(path, [&] { (void)read_fastkvzip_gates(path); });
}

}  // namespace kvaudit::methods
