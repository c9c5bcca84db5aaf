// load_model_weights: a decoder model in the layout of runners/model/model_weights.h, from
//  * an HF directory (config.json [+ generation_config.json], model.safetensors or a sharded
//    checkpoint with model.safetensors.index.json). Tensor names
//    (docs/design/numerics.md §Model config): model.embed_tokens.weight,
//    model.layers.{i}.{input_layernorm, post_attention_layernorm}.weight,
//    model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias when attention_bias),
//    model.layers.{i}.mlp.{gate,up,down}_proj.weight, model.norm.weight, lm_head.weight (absent or
//    ignored when tie_word_embeddings). F32/F16/BF16 tensors are widened exactly. config.dtype
//    comes from config.json's torch_dtype/dtype, else from the checkpoint (BF16 embeddings ->
//    bf16, else f32); with bf16, non-BF16 tensors are rounded to bf16 as HF casts them on load.
//  * a `.gguf` file: token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
//    ffn_gate, ffn_up, ffn_down}, output_norm, output (absent -> tied), blk.N.attn_{q,k,v}.bias for
//    qwen2; dequantized to f32. For llama-arch files the Q/K rows are un-permuted to HF rotate-half
//    order (qk_permutation.h), as transformers does when it loads a GGUF.
// Every tensor's shape is checked against the config: errors name the file, the tensor, the
// expected and the actual shape; a missing tensor is named.
#pragma once

#include <filesystem>

#include "runners/model/model_weights.h"

namespace kvaudit::model {

// Dispatches on the path: a directory -> HF checkpoint, a regular file ending in ".gguf" -> GGUF.
ModelWeights load_model_weights(const std::filesystem::path& path);

ModelWeights load_hf_weights(const std::filesystem::path& model_dir);
ModelWeights load_gguf_weights(const std::filesystem::path& gguf_path);

}  // namespace kvaudit::model
