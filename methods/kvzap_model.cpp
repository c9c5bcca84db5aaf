// The KVzap surrogate model file reader (kvzap_model.h).
#include "methods/kvzap_model.h"

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "methods/artefact_files.h"

namespace kvaudit::methods {
namespace {

constexpr const char* kLayersPrefix = "layers.";

// "layers.<i>.<rest>" → (i, rest); (-1, "") for any other name. Indices are canonical decimals.
std::pair<int, std::string> split_layer_name(const std::string& name) {
  const std::string prefix = kLayersPrefix;
  if (!name.starts_with(prefix)) return {-1, ""};
  const std::size_t start = prefix.size();
  const std::size_t dot = name.find('.', start);
  if (dot == std::string::npos || dot == start || dot - start > 6) return {-1, ""};
  int layer = 0;
  for (std::size_t i = start; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return {-1, ""};
    layer = layer * 10 + (name[i] - '0');
  }
  if (dot - start > 1 && name[start] == '0') return {-1, ""};
  return {layer, name.substr(dot + 1)};
}

const std::set<std::string>& linear_tensors() {
  static const std::set<std::string> names{"weight", "bias"};
  return names;
}
const std::set<std::string>& mlp_tensors() {
  static const std::set<std::string> names{"0.weight", "0.bias", "2.weight", "2.bias"};
  return names;
}

std::string layer_tensor(int layer, const std::string& rest) {
  return kLayersPrefix + std::to_string(layer) + "." + rest;
}

void require_kvzap_shape(const std::string& source, const std::string& name,
                         const std::vector<std::int64_t>& shape,
                         const std::vector<std::int64_t>& want, const std::string& meaning) {
  if (shape != want)
    fail_artefact(source, "tensor '" + name + "' has shape " + shape_text(shape) + ", expected " +
                              shape_text(want) + " (" + meaning + ")");
}

KvzapLayer read_kvzap_layer(const std::string& source, KvzapModelType type, int layer,
                            std::map<std::string, ArtefactTensor>& tensors) {
  const auto take = [&](const std::string& rest) -> ArtefactTensor& {
    return tensors.at(layer_tensor(layer, rest));
  };
  KvzapLayer out;
  out.type = type;
  ArtefactTensor& first = take(type == KvzapModelType::linear ? "weight" : "0.weight");
  const std::string first_name =
      layer_tensor(layer, type == KvzapModelType::linear ? "weight" : "0.weight");
  if (first.shape.size() != 2 || first.shape[0] < 1 || first.shape[1] < 1)
    fail_artefact(source,
                  "tensor '" + first_name + "' has shape " + shape_text(first.shape) +
                      (type == KvzapModelType::linear ? ", expected [KV heads, hidden size]"
                                                      : ", expected [hidden_dim, hidden size]"));
  out.input_dim = static_cast<int>(first.shape[1]);
  if (type == KvzapModelType::linear) {
    out.output_dim = static_cast<int>(first.shape[0]);
    require_kvzap_shape(source, layer_tensor(layer, "bias"), take("bias").shape, {first.shape[0]},
                        "[KV heads]");
    out.w1 = std::move(first.values);
    out.b1 = std::move(take("bias").values);
    return out;
  }
  out.hidden_dim = static_cast<int>(first.shape[0]);
  require_kvzap_shape(source, layer_tensor(layer, "0.bias"), take("0.bias").shape, {first.shape[0]},
                      "[hidden_dim]");
  const ArtefactTensor& second = take("2.weight");
  if (second.shape.size() != 2 || second.shape[0] < 1 || second.shape[1] != first.shape[0])
    fail_artefact(source, "tensor '" + layer_tensor(layer, "2.weight") + "' has shape " +
                              shape_text(second.shape) + ", expected [KV heads, " +
                              std::to_string(first.shape[0]) + "]");
  out.output_dim = static_cast<int>(second.shape[0]);
  require_kvzap_shape(source, layer_tensor(layer, "2.bias"), take("2.bias").shape,
                      {second.shape[0]}, "[KV heads]");
  out.w1 = std::move(first.values);
  out.b1 = std::move(take("0.bias").values);
  out.w2 = std::move(take("2.weight").values);
  out.b2 = std::move(take("2.bias").values);
  return out;
}

// The model from the file's tensor names and a reader of the named tensors.
template <typename ReadTensors>
std::vector<KvzapLayer> model_from(const std::string& source, const std::vector<std::string>& names,
                                   ReadTensors read_tensors) {
  std::set<int> layers;
  bool linear = false;
  bool mlp = false;
  for (const std::string& name : names) {
    const auto [layer, rest] = split_layer_name(name);
    if (layer < 0) continue;
    layers.insert(layer);
    linear = linear || linear_tensors().contains(rest);
    mlp = mlp || mlp_tensors().contains(rest);
  }
  if (layers.empty() || (!linear && !mlp))
    fail_artefact(
        source,
        "holds no KVzap surrogate tensors (expected \"layers.0.weight\" and "
        "\"layers.0.bias\" for the linear model, or \"layers.0.0.weight\", \"layers.0.0.bias\", "
        "\"layers.0.2.weight\", \"layers.0.2.bias\" for the mlp model)");
  if (linear && mlp)
    fail_artefact(
        source,
        "holds both linear (layers.i.weight) and mlp (layers.i.0.weight) tensors; a KVzap model "
        "is one or the other");
  const KvzapModelType type = linear ? KvzapModelType::linear : KvzapModelType::mlp;
  const int n_layers = *layers.rbegin() + 1;
  if (static_cast<int>(layers.size()) != n_layers)
    fail_artefact(source,
                  "the surrogate layers are not numbered 0.." + std::to_string(n_layers - 1));
  std::vector<std::string> wanted;
  for (int layer = 0; layer < n_layers; ++layer)
    for (const std::string& rest : linear ? linear_tensors() : mlp_tensors())
      wanted.push_back(layer_tensor(layer, rest));
  std::map<std::string, ArtefactTensor> tensors = read_tensors(wanted);
  std::vector<KvzapLayer> model;
  for (int layer = 0; layer < n_layers; ++layer) {
    model.push_back(read_kvzap_layer(source, type, layer, tensors));
    const KvzapLayer& l = model.back();
    const KvzapLayer& first = model.front();
    if (l.input_dim != first.input_dim || l.hidden_dim != first.hidden_dim ||
        l.output_dim != first.output_dim)
      fail_artefact(source,
                    "the surrogate of layer " + std::to_string(layer) +
                        " has another shape than layer 0's (kvpress builds every layer alike)");
  }
  return model;
}

}  // namespace

std::vector<KvzapLayer> read_kvzap_model(const std::string& path) {
  return parse_kvzap_model(read_artefact_bytes(path), path);  // the file is read once
}

std::vector<KvzapLayer> parse_kvzap_model(std::vector<unsigned char> bytes,
                                          const std::string& source) {
  const std::vector<std::string> names = parse_safetensors_names(bytes, source);
  return model_from(source, names, [&](const std::vector<std::string>& w) {
    return parse_safetensors_tensors(std::move(bytes), source, w);
  });
}

void check_kvzap_model_file(const std::string& path) {
  check_without_path_prefix(path, [&] { (void)read_kvzap_model(path); });
}

}  // namespace kvaudit::methods
