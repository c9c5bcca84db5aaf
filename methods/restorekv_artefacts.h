// The two artefacts RestoreKV (kvpress 0.5.5 kvpress/presses/restorekv_press.py, RestoreKVPress)
// takes from the user: the restore-token embeddings and the PEFT LoRA adapter trained with them
// (docs/design/restorekv.md "What a user must bring" and "The adapter: PEFT LoRA file format").
//
// restore_embeddings.safetensors: exactly one tensor, `restore_embeddings`, 2-D [n, D] (n ≥ 1
// restore tokens, D ≥ 1 the model's hidden size); F32, F16 or BF16, widened to f32.
//
// The adapter directory (what peft's save_pretrained writes; kvpress loads it with transformers'
// model.load_adapter):
//   adapter_config.json        strict JSON (no duplicate keys): peft_type "LORA"; r an integer ≥ 1;
//                              lora_alpha a number; use_rslora a boolean (absent = false); scaling
//                              s = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora (peft's
//                              LoraLayer.update_layer, in double); target_modules a list of names
//                              from q_proj k_proj v_proj o_proj gate_proj up_proj down_proj (a
//                              string, i.e. "all-linear" or a regex, is refused). Refused because
//                              they change what the adapter computes in ways kvaudit does not
//                              implement: fan_in_fan_out true, bias other than "none", lora_bias
//                              true, use_dora true, use_qalora true, a non-empty rank_pattern or
//                              alpha_pattern, a use_bdlora / arrow_config / kasa_config other than
//                              null (false for use_bdlora), and any of modules_to_save,
//                              trainable_token_indices, target_parameters, layer_replication,
//                              layers_to_transform, layers_pattern, exclude_modules,
//                              alora_invocation_tokens that is not null or empty. Other fields are
//                              ignored (peft adds fields across versions).
//   adapter_model.safetensors  for each decoder layer i and targeted module, nothing else (P =
//                              base_model.model.model.layers.{i}):
//                                P.self_attn.{q,k,v,o}_proj.lora_A.weight
//                                P.mlp.{gate,up,down}_proj.lora_A.weight
//                              [r, in_features], and the same with lora_B.weight [out_features, r]
//                              (F32, F16 or BF16, widened to f32). Every A has its B; the layers
//                              are numbered 0..n−1 and every targeted module is in every layer
//                              (peft wraps the module in every layer, and one the file lacks would
//                              keep peft's initial weights); a module has the same in/out in every
//                              layer, and the widths that are the same model quantity agree (q, k,
//                              v, gate, up in and o, down out: the hidden size; o in and q out; k
//                              and v out; down in and gate, up out). A pickled adapter_model.bin
//                              (which transformers would also load) is refused.
// peft's LoRA Linear (peft 0.21.2 tuners/lora/layer.py, Linear.forward) adds, while active,
//   y += s · B (A x)
// to each targeted projection y = W x. Kept apart from the method so that the catalogue's
// plan-time checks link without the methods library.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::methods {

// The projections of a llama-style decoder layer a LoRA may target (peft module-name suffixes).
enum class LoraTarget { q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj };
std::string_view lora_target_name(LoraTarget target);

// One targeted Linear of one layer: y += scaling · B (A x).
struct LoraModule {
  int in_features = 0;
  int out_features = 0;
  std::vector<float> a;  // [r, in_features]  (lora_A.weight), values widened to f32
  std::vector<float> b;  // [out_features, r] (lora_B.weight)
};

struct LoraAdapter {
  int rank = 0;          // r
  double scaling = 0.0;  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora
  // layers[i]: the modules of decoder layer i that the adapter targets (absent = untouched)
  std::vector<std::map<LoraTarget, LoraModule>> layers;
};

struct RestoreArtefacts {
  int tokens = 0;                 // n restore tokens
  int hidden_size = 0;            // D
  std::vector<float> embeddings;  // [n, D] restore_embeddings, widened to f32
  LoraAdapter adapter;
};

// The model shapes the artefacts must fit (checked when a cell runs).
struct RestoreModelShape {
  int num_layers = 0;
  int hidden_size = 0;
  int q_width = 0;   // H · head_dim (q_proj out, o_proj in)
  int kv_width = 0;  // Hkv · head_dim (k_proj, v_proj out)
  int intermediate_size = 0;
};

// Reads both artefacts; std::invalid_argument "<path>: <field or tensor>: what is wrong" (for the
// adapter, path = the directory and the field is prefixed with the file's name, e.g.
// "<dir>: adapter_config.json: r: ...").
RestoreArtefacts read_restorekv_artefacts(const std::string& embeddings_file,
                                          const std::string& adapter_dir);

// The adapter alone from adapter_config.json's text and adapter_model.safetensors' bytes (the fuzz
// target's entry; `source` names the adapter in messages as the directory does above).
LoraAdapter parse_lora_adapter(std::string_view config_json,
                               std::vector<unsigned char> safetensors_bytes,
                               const std::string& source);

// The restore embeddings from restore_embeddings.safetensors' bytes, [n, D] row-major; *tokens = n
// and *hidden = D where the pointers are not null.
std::vector<float> parse_restore_embeddings(std::vector<unsigned char> bytes,
                                            const std::string& source, int* tokens, int* hidden);

// Throws std::invalid_argument naming what does not fit the model: the adapter's layer count, a
// module's in/out against the model's projection, or the embeddings' D.
void check_restorekv_fits(const RestoreArtefacts& artefacts, const RestoreModelShape& model);

// Plan-time checks of the two path parameters (the files' own consistency; the model is checked by
// check_restorekv_fits when a cell runs). The message leaves the path out (the plan prefixes it).
void check_restore_embeddings_file(const std::string& path);
void check_restorekv_adapter_dir(const std::string& path);

}  // namespace kvaudit::methods
