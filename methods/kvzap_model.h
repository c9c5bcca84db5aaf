// The KVzap surrogate model file (methods/kvzap.h `model` parameter): the model.safetensors of
// kvpress 0.5.5's KVzapModel (kvpress/presses/kvzap_press.py; what KVzapModel.save_pretrained
// writes and what kvpress downloads from the hub as nvidia/KVzap-<linear|mlp>-<model>). One module
// per layer i = 0..n_layers-1, named as torch names the entries of its ModuleList `layers`:
//   linear:  layers.i.weight   [Hkv, D]   layers.i.bias   [Hkv]
//   mlp:     layers.i.0.weight [M, D]     layers.i.0.bias [M]      (first Linear)
//            layers.i.2.weight [Hkv, M]   layers.i.2.bias [Hkv]    (second Linear; 1 is the GELU)
// (F32, F16 or BF16; D = the model's hidden size, Hkv = its KV heads (KVzapConfig.output_dim),
// M = KVzapConfig.hidden_dim). Every layer has layer 0's shapes (kvpress builds them alike).
// The tensor names decide the model type (kvpress's model_type only picks which hub repository to
// download; here the user names the file): a file with both kinds of names, or neither, is refused.
// Kept apart from the method (kvzap.h) so that the catalogue's plan-time check links without the
// methods library.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::methods {

// kvpress KVzapPress.model_type: which surrogate the file holds.
enum class KvzapModelType { mlp, linear };

// One layer's surrogate, values widened to f32.
struct KvzapLayer {
  KvzapModelType type = KvzapModelType::mlp;
  int input_dim = 0;      // D
  int hidden_dim = 0;     // M (0 for the linear model)
  int output_dim = 0;     // Hkv
  std::vector<float> w1;  // mlp: [M, D]; linear: [Hkv, D]
  std::vector<float> b1;  // mlp: [M];    linear: [Hkv]
  std::vector<float> w2;  // mlp: [Hkv, M]; linear: empty
  std::vector<float> b2;  // mlp: [Hkv];    linear: empty
};

// The surrogate of every layer, in layer order; throws std::invalid_argument ("path: what") when
// the file is not a safetensors file, holds both or neither model type's tensors, misses a tensor,
// has layers that are not numbered 0..n−1, or shapes that disagree.
std::vector<KvzapLayer> read_kvzap_model(const std::string& path);
// The same from the file's bytes (`source` names it in messages; the fuzz target's entry).
std::vector<KvzapLayer> parse_kvzap_model(std::vector<unsigned char> bytes,
                                          const std::string& source);

// Plan-time check of the `model` parameter (the file's own consistency; the layer count, D and Hkv
// are checked against the model when a capture is seen). The message leaves the path out (the plan
// prefixes it).
void check_kvzap_model_file(const std::string& path);

}  // namespace kvaudit::methods
