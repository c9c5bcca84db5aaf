// Method: an eviction method configured for one cell, turning a prefill's captured layers into
// real evictions (a kept-position list per layer and KV head).
//
//   auto method = make_method(config, configs);           // methods/method_factory.h
//   Selection kept = method->select(layers, budget, ctx);  // layers: one LayerCapture per layer
//
// Budget arithmetic is kvpress's (docs/design/kvpress.md; kvpress 0.5.5 ScorerPress): n_kept =
// floor(L·(1−cr)) in double, at least 1 (kvpress PR #264). Scorer methods (ScorerMethod) keep the
// n_kept highest scores per KV head; wrappers (AdaKV, ChunkKV, CriticalKV) reuse a scorer's scores
// with their own selection; cross-layer methods (Layer-DefensiveKV) see every layer before
// choosing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "methods/layer_capture.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

// What a cell asks of a method.
struct Budget {
  // Fraction of the L candidates removed (kvpress `compression_ratio`), in [0, 1). Used by
  // ratio methods.
  double compression = 0.0;
  // Request-adaptive threshold T (ReFreeKV); used by threshold methods only.
  double threshold = 0.0;
};

// Per-cell facts a method may need besides the capture.
class ScoreMemo;         // methods/score_memo.h
class ExtraPass;         // methods/extra_pass.h
struct ExtraPassResult;  // methods/extra_pass.h

struct SelectionContext {
  std::uint64_t seed = 0;  // the study seed
  // Key of the cell's random draws (RandomPress): a stable id of (unit content without attention
  // backend or device, method config, budget, protocol), so a cell keeps the same positions under
  // every backend (suite/manifest/expansion.h selection_key).
  std::uint64_t cell_key = 0;
  // Optional: scores shared by the cells of one unit (score_memo.h); results do not depend on it.
  ScoreMemo* memo = nullptr;
  // What the method's extra forward pass gave at the cell's boundary (Method::extra_pass(),
  // methods/extra_pass.h): set by the unit runner for such methods, nullptr otherwise.
  const ExtraPassResult* extra_pass = nullptr;
  // Question tokens at the end of the view (positions L − question_tokens .. L − 1): the unit's
  // question length under query-aware, 0 under query-agnostic (Finch's window is the question).
  int question_tokens = 0;
};

// A kept entry whose value vector a method rewrites after eviction (MergingPress folds evicted
// values into kept ones): the new value, f32 (the cache rounds it to its storage precision).
struct ValueReplacement {
  std::int32_t layer = 0;
  std::int32_t kv_head = 0;
  std::int32_t position = 0;  // original position, one the head keeps
  std::vector<float> value;   // head_dim values
};

struct RestoreArtefacts;  // methods/restorekv_artefacts.h

// kept[layer][kv_head]: the original positions kept, strictly ascending, each in [0, L).
struct Selection {
  std::vector<std::vector<std::vector<std::int32_t>>> kept;
  // Edits of the kept entries after eviction; empty = none (every method but the two below).
  // ThinK (key-channel pruning): zeroed_key_channels[layer][kv_head] = the key channels set to
  // zero in every kept entry of that head, strictly ascending, each in [0, head_dim); the cache
  // counts their bytes as freed (SequenceCache::zero_key_channels).
  std::vector<std::vector<std::vector<std::int32_t>>> zeroed_key_channels;
  // Merging: kept entries whose value vector is replaced (SequenceCache::replace_values).
  std::vector<ValueReplacement> value_replacements;
  // DMS with decoding (methods/dms.h): window_scores[layer][kv_head] = the wrapped scorer's scores
  // of the last min(L, sliding_window_size) candidates (positions L − n .. L − 1, ascending), which
  // are judged against the threshold while decoding, when they leave the window
  // (runners/unit/dms_decoding.h). Empty for every other method.
  std::vector<std::vector<std::vector<float>>> window_scores;
  // RestoreKV (methods/restorekv.h): rows the cache gains before eviction — a forward of the
  // restore embeddings with the LoRA adapter active at positions L .. L+n−1 on the full cache
  // (InferenceEngine::append_restore_rows) — kept in every head. nullptr for every other method.
  std::shared_ptr<const RestoreArtefacts> restore_rows;

  // Σ over layers and heads of kept counts.
  std::int64_t kept_entries() const;
};

// n_kept = max(1, floor(L·(1−compression))) computed in double (kvpress ScorerPress + PR #264).
std::int64_t kept_count(std::int64_t length, double compression);

class Method {
 public:
  virtual ~Method() = default;
  // The cell's kept sets. `layers` holds every layer of the model in order, all with the same L.
  // Throws std::invalid_argument (with the method's name) if the capture cannot serve the method,
  // e.g. fewer window rows than its window or L ≤ window.
  virtual Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                           const SelectionContext& context) const = 0;
  // Window rows this method reads from LayerCapture::window_queries (0 if none).
  virtual int window_needed() const { return 0; }
  // Window rows it reads when the unit's question has `question_tokens` tokens (Finch's window
  // is the question); the capture keeps the most any cell needs. Default: window_needed().
  virtual int window_rows_needed(int question_tokens) const {
    (void)question_tokens;
    return window_needed();
  }
  // Whether it reads column_sums / query moments (the capture can skip what no cell needs).
  virtual bool needs_column_sums() const { return false; }
  virtual bool needs_query_moments() const { return false; }
  // Whether it reads LayerCapture::queries / queries_prerope (every query row before the boundary).
  virtual bool needs_all_queries() const { return false; }
  // A forward pass of its own the runner must run after the prefill, on a copy of the prefilled
  // cache, before select() (KVzip's context reconstruction; methods/extra_pass.h), or nullptr.
  virtual const ExtraPass* extra_pass() const { return nullptr; }
  // Whether it reads LayerCapture::attention_cosine (SqueezeAttention's layer importance).
  virtual bool needs_attention_cosine() const { return false; }
  // Whether it reads LayerCapture::attention_input (FastKVzip's gates; CPU capture only).
  virtual bool needs_attention_input() const { return false; }
  virtual std::string name() const = 0;

  // The typed catalogue parameters this method was made from (make_method records them with
  // set_parameters; a method built directly, as tests do, has std::monostate). Device fast paths
  // (the GPU scorers) choose by them, so they read exactly what the CPU method was built with.
  const MethodParams& parameters() const { return parameters_; }
  void set_parameters(MethodParams parameters) { parameters_ = std::move(parameters); }

 private:
  MethodParams parameters_;
};

// A per-layer scorer: scores[kv_head * L + j] for every candidate j of one layer; higher = keep.
// Protected tokens (windows, sinks) get max+1 as kvpress does, where max is over the whole layer.
class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual void score(const LayerCapture& layer, const SelectionContext& context,
                     std::span<float> scores) const = 0;
  // The scores kvpress computes when the press also knows the budget (StreamingLLM's 0/1 pattern
  // depends on n_pruned, CriticalKV's stage 1 on n_kept). Selection code (ScorerMethod and the
  // wrappers) calls this one; the default ignores the budget and calls score().
  virtual void score_for_budget(const LayerCapture& layer, const Budget& budget,
                                const SelectionContext& context, std::span<float> scores) const {
    (void)budget;
    score(layer, context, scores);
  }
  // Whether score_for_budget's result depends on the budget (StreamingLLM, CriticalKV) or on the
  // cell (Random: SelectionContext::cell_key); such scores are never shared through a ScoreMemo.
  virtual bool scores_depend_on_budget() const { return false; }
  virtual bool scores_depend_on_cell() const { return false; }
  virtual int window_needed() const { return 0; }
  virtual bool needs_column_sums() const { return false; }
  virtual bool needs_query_moments() const { return false; }
  virtual bool needs_all_queries() const { return false; }
  // Whether it reads LayerCapture::attention_input (KVzap's surrogate; CPU capture only).
  virtual bool needs_attention_input() const { return false; }
  // Whether kvpress's scores are in the model's dtype (bf16 for a bf16 model, e.g. KVzap's
  // surrogate cast to it) rather than f32 (Knorm's vector_norm with dtype=float32, ...). DMS
  // compares its threshold in that dtype (methods/dms.h).
  virtual bool scores_in_model_dtype() const { return false; }
  // Whether a candidate's score depends on that candidate's own entry alone (its key, value or
  // attention input: KNorm, KVzap), so that scoring entries one at a time, as they arrive while
  // decoding, gives the scores a whole view would (DMS with decoding, methods/dms.h).
  virtual bool per_entry() const { return false; }
  virtual std::string name() const = 0;
};

}  // namespace kvaudit::methods
