// DuoAttentionMethod: retrieval heads keep the whole cache, streaming heads only the attention
// sinks and the recent tokens (Xiao et al. 2025, "DuoAttention: Efficient Long-Context LLM
// Inference with Retrieval and Streaming Heads", arXiv 2410.10819; kvpress 0.5.5
// kvpress/presses/duo_attention_press.py DuoAttentionPress). With one score r_{ℓ,h} per
// (layer, KV head) — how much the head needs full attention — and the cell's budget ratio ρ
// (kvpress `head_compression_ratio`, which kvpress's evaluate.py sets from `compression_ratio`):
//   n_pruned = round(n_layers·Hkv·ρ)  (Python round: half to even)
//   streaming heads = the n_pruned lowest r over all layers and KV heads;
//   a streaming head keeps [0, sink) ∪ [L − recent, L) (everything when sink ≥ L − recent);
//   every other head keeps all L positions.
// Realised compression = share of streaming heads × (1 − (sink + recent)/L), as kvpress reports.
//
// Head scores, by variant:
//   pattern    (default) from the `pattern` file: DuoAttention's own
//              attn_patterns/<model>/full_attention_heads.tsv (mit-han-lab/duo-attention, what
//              kvpress downloads): num_layers rows × num_kv_heads tab-separated finite values,
//              clipped to [0, 1] as kvpress does. sink_size / recent_size come from the pattern's
//              config.json there (kvpress reads them from it); here they are parameters.
//   on_the_fly kvpress's `on_the_fly_scoring` (duo_attention_on_the_fly), computed from the
//              prefill itself instead of 50 BookSum samples: per layer, q̄_h = mean over the L
//              rows of the pre-RoPE queries, k̄ = the same of the pre-RoPE keys of h's KV head;
//              with Q = 500 positions, Q_p = RoPE_p(q̄_h), K_p = RoPE_p(k̄),
//              a_p = softmax_p(Q_{Q−1}·K_p/√d) (p = 0..Q−1), r_h = (1/Q)·Σ_i Σ_{p≤i} a_p (the area
//              under the cumulated attention curve), and r of a KV head = the mean over its group.
//              kvpress forces sink 128 / recent 256 there; here the parameters apply.
// Deviations: the selection is real eviction (kvpress masks the keys, attention_patch.py). Ties
// among head scores: the lower flat (layer, head) index becomes streaming first (a stable sort);
// numpy's default argsort guarantees no order among ties. on_the_fly: the calibration text is the
// prompt (prefix + context, + question under query-aware), so the head split varies per prompt,
// whereas kvpress computes it once per model on BookSum; it is computed in double (kvpress in the
// model dtype; in bf16 mode the means are rounded to bf16 as kvpress's are). recent_size ≥ 1:
// kvpress's slice sink:−recent masks nothing when recent is 0.
#pragma once

#include <string>
#include <vector>

#include "methods/artefact_files.h"
#include "methods/method.h"

namespace kvaudit::methods {

// kvpress on-the-fly's number of synthetic positions (q_len of duo_attention_on_the_fly).
inline constexpr int kDuoOnTheFlyPositions = 500;

// The on-the-fly head score of every KV head of one layer (from queries_prerope / keys_prerope
// and rope_inv_freq), [Hkv].
std::vector<double> duo_on_the_fly_head_scores(const LayerCapture& layer);

// The kept positions of one head: all of 0..L−1, or the streaming pattern.
std::vector<std::int32_t> duo_kept_positions(int length, bool streaming, int sink_size,
                                             int recent_size);

class DuoAttentionMethod : public Method {
 public:
  // Reads and checks the pattern file now unless params.on_the_fly_scoring (std::invalid_argument
  // naming the file on failure).
  explicit DuoAttentionMethod(DuoAttentionParams params);
  // With head scores already in memory (tests): [layers, KV heads]; `source` names them in errors.
  DuoAttentionMethod(DuoAttentionParams params, ArtefactMatrix head_scores, std::string source);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  bool needs_all_queries() const override { return params_.on_the_fly_scoring; }
  std::string name() const override { return "duo_attention"; }

 private:
  DuoAttentionParams params_;
  std::string source_;
  ArtefactMatrix head_scores_;  // pattern variant: clipped to [0, 1]
};

}  // namespace kvaudit::methods
