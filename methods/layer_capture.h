// LayerCapture: the one narrow view through which an eviction method sees a layer of a prefill.
//
// The unit runner prefills prefix+context+question once and captures, per layer, what scorers need
// (runners/unit/prefill_capture.h). For a cell it hands each method the view of its protocol's
// boundary b (docs/design/protocols.md §Protocols):
//   query-agnostic  b = end of context  (prefix + context tokens)
//   query-aware     b = end of question (prefix + context + question tokens)
// Everything in the view is restricted to rows (queries) and columns (keys) before b, so a method
// cannot see what its protocol is not entitled to. Positions 0..b-1 are the eviction candidates;
// the view's `length` is b (kvpress's L = k_len at compression time).
//
// Methods never include a backend's internals: this header depends on nothing but the standard
// library. Values are f32; in bf16 mode (model_is_bf16) they are bf16-representable, exactly what
// the model computed (and what HF's cache would hold).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvaudit::methods {

struct LayerCapture {
  int layer = 0;               // 0-based
  int num_layers = 0;          // of the model (PyramidKV's budget schedule)
  int num_heads = 0;           // H query heads
  int num_kv_heads = 0;        // Hkv; query head h reads KV head h / (H / Hkv)
  int head_dim = 0;            // d
  int hidden_size = 0;         // D (o_proj's output size)
  int length = 0;              // L = the boundary: candidates are positions 0..L-1
  bool model_is_bf16 = false;  // the checkpoint computes in bf16 (HF rounding points emulated)

  // Per KV head, [L, d] row-major: keys (post-RoPE, as HF's cache stores them) and values of
  // positions 0..L-1. keys.size() == values.size() == num_kv_heads.
  std::vector<std::span<const float>> keys;
  std::vector<std::span<const float>> values;

  // The last `window_rows` queries before the boundary (positions L-window_rows..L-1), post-RoPE,
  // [H, window_rows, d] row-major. window_rows = min(captured window, L); a method needing w rows
  // reads the last w of them (rows window_rows-w..window_rows-1).
  int window_rows = 0;
  std::span<const float> window_queries;

  // Attention column sums over the rows before the boundary, [H, L]:
  //   column_sums[h, j] = Σ_{i<L} A_h(i, j),
  // A computed as HF eager attention computes it (scores, scaling and softmax rounded to bf16 in
  // bf16 mode; fp32 otherwise), summed in fp64 and stored as f32. Causality: row i sees j ≤ i.
  std::span<const float> column_sums;

  // Pre-RoPE query moments over rows moments_first_row..L-1 (kvpress ExpectedAttention drops the
  // first n_sink = 4 rows), accumulated in fp64:
  //   query_sum   [H, d]     Σ q_i
  //   query_outer [H, d, d]  Σ q_i q_iᵀ
  // query_count = L - moments_first_row (0 when L ≤ moments_first_row).
  int moments_first_row = 4;
  std::int64_t query_count = 0;
  std::span<const double> query_sum;
  std::span<const double> query_outer;

  // Every query row before the boundary (positions 0..L-1), [H, L, d] row-major, both before and
  // after RoPE (kvpress's get_prerope_query_states and the rotated queries attention uses). Filled
  // only when some cell's method asks for them (Method::needs_all_queries); empty otherwise.
  std::span<const float> queries_prerope;
  std::span<const float> queries;
  // The keys of positions 0..L-1 before RoPE, [Hkv, L, d] row-major (kvpress's
  // get_prerope_key_states: LeverageScorePress, CompactorPress); filled with the queries above.
  std::span<const float> keys_prerope;

  // Per position i < L, the cosine similarity of the residual stream entering this layer, x_i, and
  // the same stream after the self-attention block's residual add, x_i + attn_i (SqueezeAttention's
  // layer importance), [L], computed in fp64 from the model's values and stored as f32. Filled only
  // when some cell's method asks for it (Method::needs_attention_cosine); empty otherwise.
  std::span<const float> attention_cosine;

  // The input of this layer's self-attention block (the input_layernorm output that q/k/v are
  // projected from) of positions 0..L-1, [L, D] row-major, as the model computed it (FastKVzip's
  // gates). Filled only when some cell's method asks for it (Method::needs_attention_input);
  // empty otherwise.
  std::span<const float> attention_input;

  // o_proj weight of this layer in HF layout [D, H·d] row-major (CriticalKV, DefensiveKV).
  std::span<const float> o_proj;

  // RoPE inverse frequencies [d/2] exactly as the model computes them (default or llama3 scaling;
  // attention scaling is 1 for both), for ExpectedAttention's averaged future rotation.
  std::span<const float> rope_inv_freq;

  int group_size() const { return num_heads / num_kv_heads; }
  int kv_head_of(int head) const { return head / group_size(); }
};

}  // namespace kvaudit::methods
