// ModelConfig from GGUF metadata (llama.cpp key names, `src/llama-arch.cpp`):
//   general.architecture: llama | qwen2 | mistral (ModelConfig::architecture_name keeps the string)
//   <arch>.context_length -> max_position_embeddings     <arch>.embedding_length -> hidden_size
//   <arch>.block_count -> num_layers                      <arch>.feed_forward_length ->
//   intermediate <arch>.attention.head_count -> num_heads <arch>.attention.head_count_kv -> kv
//   heads
//     (default head_count)
//   <arch>.attention.layer_norm_rms_epsilon -> rms_norm_eps
//   <arch>.rope.freq_base -> rope.theta (default 10000)
//   <arch>.rope.dimension_count -> head_dim (default embedding_length / head_count); must equal the
//     head size (partial rotary is not supported)
//   <arch>.attention.key_length / value_length, when present, must equal head_dim
//   <arch>.rope.scaling.type: none | llama3 (factor, original_context_length, and llama3 low/high
//     frequency factors when present); linear / yarn / others rejected
//   vocab: tokenizer.ggml.tokens length, else <arch>.vocab_size, else token_embd.weight's ne[1]
//   bos/eos/pad: tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id
//   tie_word_embeddings: true when the file has no `output.weight`
//   attention_bias: true when blk.0.attn_q.bias is present (qwen2)
//   dtype: f32 (quantized weights are dequantized to f32, as transformers does with gguf_file=).
// Errors are ModelInputError naming the file and the key.
#pragma once

#include "runners/model/formats/gguf.h"
#include "runners/model/model_config.h"

namespace kvaudit::model {

ModelConfig config_from_gguf(const GgufFile& file);

}  // namespace kvaudit::model
