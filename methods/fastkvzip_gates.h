// The FastKVzip gates file (methods/fastkvzip.h `gates` parameter): a safetensors file holding,
// for each layer i = 0..n_layers-1, the tensors of kvpress 0.5.5's FastKVzipGate.state_dict()
// (kvpress/presses/fastkvzip_press.py) prefixed "i." — the names torch.nn.ModuleList(gates).
// state_dict() has:
//   i.q_proj.weight [Hkv·G·o, D]   i.q_proj.bias [Hkv·G·o]   i.k_proj.weight [Hkv·o, D]
//   i.q_norm.weight [o]            i.k_norm.weight [o]       i.k_base [Hkv, 1, S, o]
//   i.b [Hkv, 1, G]
// (F32, F16 or BF16; o = output dim, Hkv KV heads, G = H/Hkv query groups, S learned sink keys,
// D = hidden size). Every layer must have layer 0's shapes (kvpress builds every gate with them).
// Kept apart from the method (fastkvzip.h) so that the catalogue's plan-time check links without
// the methods library.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::methods {

// One layer's gate, values widened to f32.
struct FastKvzipGate {
  int kv_heads = 0;             // Hkv
  int groups = 0;               // G
  int output_dim = 0;           // o
  int sinks = 0;                // S (learned sink keys)
  int input_dim = 0;            // D
  std::vector<float> q_weight;  // [Hkv·G·o, D]
  std::vector<float> q_bias;    // [Hkv·G·o]
  std::vector<float> k_weight;  // [Hkv·o, D]
  std::vector<float> q_norm;    // [o]
  std::vector<float> k_norm;    // [o]
  std::vector<float> k_base;    // [Hkv, S, o]
  std::vector<float> bias;      // b: [Hkv, G]
};

// The gates of every layer in the file's layer order; throws std::invalid_argument
// ("path: what") for a missing or misshapen tensor, layers that are not 0..n−1 or differ in shape.
std::vector<FastKvzipGate> read_fastkvzip_gates(const std::string& path);
// The same from the file's bytes (`source` names it in messages; the fuzz target's entry).
std::vector<FastKvzipGate> parse_fastkvzip_gates(const std::vector<unsigned char>& bytes,
                                                 const std::string& source);
// Plan-time check (ParamSpec::check_file): read_fastkvzip_gates without the path in the message.
void check_fastkvzip_gates_file(const std::string& path);

}  // namespace kvaudit::methods
