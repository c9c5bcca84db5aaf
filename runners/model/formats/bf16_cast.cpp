// The bf16 cast; see bf16_cast.h.
#include "runners/model/formats/bf16_cast.h"

#include <vector>

#include "runners/model/bf16.h"

namespace kvaudit::model {
namespace {

void round_all(std::vector<float>& values) {
  for (float& v : values) v = round_to_bf16(v);
}

}  // namespace

void cast_weights_to_bf16(ModelWeights& w) {
  round_all(w.embed_tokens);
  round_all(w.final_norm);
  round_all(w.lm_head);
  for (LayerWeights& layer : w.layers) {
    for (std::vector<float>* t :
         {&layer.input_norm, &layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.q_bias,
          &layer.k_bias, &layer.v_bias, &layer.o_proj, &layer.post_attention_norm, &layer.gate_proj,
          &layer.up_proj, &layer.down_proj}) {
      round_all(*t);
    }
  }
  w.config.dtype = ComputeDtype::bf16;
}

}  // namespace kvaudit::model
