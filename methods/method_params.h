// MethodParams: every catalogue method's parameters as one typed struct each — the one place their
// types and defaults are declared (the kvpress habit: one dataclass per press). The catalogue
// (catalog.h) binds each manifest parameter name to a member of its struct, with its range, its
// per-variant defaults and its documentation; resolve_method (method_resolution.h) turns a
// manifest's method configuration into these values; the factory (method_factory.h), the plan-time
// checks (suite/manifest) and the GPU scorers (runners/cuda/capture) read them from there.
//
// A member's initializer is the parameter's default under the method's default variant.
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace kvaudit::methods {

enum class SnapKvVariant { kvpress, original };
enum class Pooling { avg, max };
enum class TovaVariant { kvpress, original };
enum class AdaKvVariant { kvpress, original };
enum class KeyDiffVariant { oneshot, block };

struct FullParams {};
struct RandomParams {};
struct KnormParams {};
struct ObservedAttentionParams {};

struct StreamingLlmParams {
  int n_sink = 4;  // initial (sink) tokens kept
};

struct SnapKvParams {
  SnapKvVariant variant = SnapKvVariant::kvpress;
  int window = 64;      // observation window w (the last w queries)
  int kernel_size = 5;  // pooling kernel over the scores (odd)
  Pooling pooling = Pooling::avg;
};

struct TovaParams {
  TovaVariant variant = TovaVariant::kvpress;
};

struct H2oParams {
  double heavy_fraction = 0.5;  // share of the kept budget given to heavy hitters
};

struct ExpectedAttentionParams {
  int n_future_positions = 512;  // future positions averaged
  int n_sink = 4;                // sink tokens excluded and kept
  bool use_covariance = true;    // use the query covariance term
  bool use_vnorm = true;         // rescale by value norms
  double epsilon = 0.0;          // additive epsilon
};

struct KeyDiffParams {
  KeyDiffVariant variant = KeyDiffVariant::oneshot;
  int block_size = 128;  // block size of the block variant
};

struct AdaKvParams {
  AdaKvVariant variant = AdaKvVariant::kvpress;
  std::string scorer;  // the manifest name of the wrapped scorer's method configuration
  double alpha = 0.2;  // safeguard fraction per head
};

struct PyramidKvParams {
  int window = 64;      // observation window
  int kernel_size = 5;  // pooling kernel (odd)
  int beta = 20;        // pyramid steepness
};

struct ChunkKvParams {
  std::string scorer;     // the wrapped scorer's configuration
  int chunk_length = 20;  // tokens per chunk
};

struct CriticalKvParams {
  std::string scorer;              // the wrapped scorer's configuration
  double first_stage_ratio = 0.5;  // budget share of stage 1
  double epsilon = 1e-4;           // additive epsilon
};

struct DefensiveKvParams {
  int window = 32;  // observation window
};

struct LayerDefensiveKvParams {
  int window = 32;  // observation window
};

struct ReFreeKvParams {
  int window = 8;  // recent window always kept
};

// std::monostate: a method built outside the catalogue (tests' own methods).
struct LagKvParams {
  int n_sink = 4;              // initial (sink) tokens always kept
  int lag_size = 128;          // partition length; partition p is scored against partition p+1
  bool cross_scoring = false;  // compare raw scores across partitions (else ranks within each)
};

enum class CurLeverage { key, value, kv_avg, kv_product };

struct CurParams {
  int num_sinks = 4;                                    // initial tokens always kept
  CurLeverage leverage_type = CurLeverage::kv_product;  // which squared norms are combined
  bool use_local_approximation = true;                  // normalise norms within local windows
  int local_window_size = 16;                           // length of those windows
};

// The lazy-layer threshold is the cell's budget (BudgetAxis::threshold), not a parameter.
struct SimLayerKvParams {
  int n_last = 1;       // last queries whose attention decides whether a layer is lazy
  int n_recent = 1024;  // recent tokens in the lazy test; a lazy layer keeps n_recent - n_last
  int n_initial = 4;    // initial tokens in the lazy test, kept by a lazy layer
};

struct NonCausalAttentionParams {
  int chunk_size = 256;  // queries and keys attend within chunks of this many positions
};

struct LeverageParams {
  int sketch_dimension = 48;  // columns of the Gaussian sketch
};

// kvpress: blending = the cell's compression ratio (CompactorPress's blending=None);
// fixed_blending: the `blending` parameter.
enum class CompactorVariant { kvpress, fixed_blending };

struct CompactorParams {
  CompactorVariant variant = CompactorVariant::kvpress;
  int sink_size_start = 8;    // first positions always kept
  int sink_size_end = 4;      // last positions always kept
  int chunk_size = 256;       // non-causal attention chunk
  int sketch_dimension = 48;  // leverage sketch columns
  double blending = 0.35;     // weight of the leverage scores (fixed_blending variant)
};

struct CapParams {
  double tau = 5.0;              // temperature of the query-key alignment weights
  int n_future_positions = 512;  // future positions of the averaged RoPE rotation
  int n_sink = 4;                // first positions excluded from scoring and kept
  double epsilon = 1e-6;         // added to the weights before the square root
};

struct CakeParams {
  int window = 32;       // observation window w (the last w positions are always kept)
  int kernel_size = 5;   // average pooling of the eviction indicator (odd)
  double tau1 = 1.0;     // temperature of the spatial dispersion (entropy) in the preference
  double tau2 = 1.0;     // temperature of the temporal shift (variance) in the preference
  double gamma = 200.0;  // weight of the attention variance in the eviction indicator
};

struct SqueezeAttentionParams {
  std::string scorer;         // the sequence-wise scorer run inside each layer with its budget
  double class3_share = 0.5;  // budget of a least-important layer, as a share of the cell's
};

// Artefact methods (methods/qfilter.h, expected_attention_stats.h, duo_attention.h): the learned
// artefact comes from a file named in the manifest (a path parameter, resolved against the
// manifest's directory; the file formats are in each method's header and in docs/METHODS.md).
struct QFilterParams {
  std::string filters;  // safetensors: q_filters [layers, KV heads, d]
};

// KVzap (methods/kvzap.h, kvpress KVzapPress): a learned per-layer surrogate of KVzip's scores.
struct KvzapParams {
  std::string model;  // safetensors: the surrogate's per-layer modules (methods/kvzap_model.h)
};

// DMS (methods/dms.h, kvpress DMSPress): evict what scores below the cell's threshold outside the
// last sliding_window_size positions; with decoding, also every later entry as it leaves the
// window.
struct DmsParams {
  std::string scorer;             // the wrapped scorer's configuration
  int sliding_window_size = 128;  // last positions never evicted
  bool decoding = false;          // go on evicting while decoding (kvpress decoding=True)
};

struct ExpectedAttentionStatsParams {
  std::string statistics;        // safetensors: query_mean [layers, H, d], query_cov [.., d, d]
  int n_future_positions = 512;  // future positions averaged
  int n_sink = 4;                // sink tokens excluded and kept
  bool use_covariance = true;    // use the query covariance term
  bool use_vnorm = true;         // rescale by value norms
  double epsilon = 0.0;          // additive epsilon
};

struct DuoAttentionParams {
  std::string pattern;              // DuoAttention's full_attention_heads.tsv [layers, KV heads]
  bool on_the_fly_scoring = false;  // score the heads from the prefill instead of a pattern
  int sink_size = 128;              // sink tokens a streaming head keeps
  int recent_size = 256;            // recent tokens a streaming head keeps
};

// KVzip (methods/kvzip.h; kvpress KVzipPress): kvzip = plain max attention, kvzip_plus = KVzip+
// normalisation (÷‖h_t‖ per reconstruction row, ×‖W_O v_j‖ per key).
enum class KvzipVariant { kvzip, kvzip_plus };

struct KvzipParams {
  KvzipVariant variant = KvzipVariant::kvzip;
  bool layerwise = false;  // the same share pruned in every layer (else one top-k over all layers)
  int n_sink = 4;          // first positions always kept (and the sink keys of the reconstruction)
  int chunk_size = 2048;   // context tokens reconstructed per pass
};

// RestoreKV (methods/restorekv.h, kvpress RestoreKVPress): KVzip's pass and selection at the
// budget-matched ratio, plus n restore rows from a LoRA pass over learned embeddings.
struct RestoreKvParams {
  KvzipVariant variant = KvzipVariant::kvzip;  // restorekv_plus = KVzip+ normalisation
  bool layerwise = false;
  int n_sink = 4;
  int chunk_size = 2048;
  std::string restore_embeddings;  // safetensors: restore_embeddings [n, D]
  std::string adapter;  // PEFT LoRA directory (adapter_config.json, adapter_model.safetensors)
};

// KVgrad (methods/kvgrad.h, kvpress KVgradPress): KVzip's reconstruction pass weighted by the
// gradient of the chunk's squared last hidden states.
struct KvgradParams {
  bool layerwise = false;  // the same share pruned in every layer (else one top-k over all layers)
  int n_sink = 4;          // first positions always kept (and the sink keys of the reconstruction)
  int chunk_size = 512;    // context tokens reconstructed (and back-propagated) per pass
};

// Wrappers of group "wrappers" (kvpress 0.5.5 PerLayerCompressionPress, ComposedPress,
// KeyRerotationPress, ChunkPress, EntropyGatedChunkKVPress, CriticalAdaKVPress). List parameters
// are TOML arrays in the manifest (methods/catalog.h ParamType::real_list, method_ref_list).
struct PerLayerCompressionParams {
  std::string scorer;                      // the wrapped scorer's configuration
  std::vector<double> compression_ratios;  // one compression ratio per layer, in layer order
};

struct ComposedParams {
  std::vector<std::string> presses;        // the scorer configurations applied in turn
  std::vector<double> compression_ratios;  // the compression ratio of each press, in order
};

struct KeyRerotationParams {
  std::string scorer;  // the wrapped scorer's configuration
};

struct ChunkParams {
  std::string scorer;       // the wrapped scorer's configuration
  int chunk_length = 1024;  // tokens per independently compressed chunk
};

struct EntropyGatedChunkKvParams {
  std::string scorer;                // the wrapped scorer's configuration
  int chunk_length = 10;             // tokens per chunk
  int low_entropy_chunk_length = 4;  // tokens kept of an important low-entropy chunk
};

struct CriticalAdaKvParams {
  std::string scorer;              // the wrapped scorer's configuration
  double alpha = 0.2;              // safeguard fraction per head (AdaKV)
  double epsilon = 1e-4;           // additive epsilon (CriticalKV stage 2)
  double first_stage_ratio = 0.5;  // budget share of stage 1 (CriticalKV)
};

// HeadKV (methods/headkv.h): per-head budgets from a head-importance file named in the manifest.
struct HeadKvParams {
  std::string head_scores;  // official HeadKV JSON {"layer-head": score or [scores]}
  int window = 32;          // observation window, always kept
  int kernel_size = 7;      // pooling kernel over the window scores (odd)
  Pooling pooling = Pooling::max;
  double beta = 1.005;       // a head keeps b - floor(b/beta) before the shared pool
  double temperature = 1.0;  // normalised scores are raised to this power
};

// LaCache (methods/lacache.h): a ladder of spans across layers, query-agnostic.
struct LaCacheParams {
  int span = 16;             // layers one ladder step covers
  int overlap = 0;           // layers consecutive ladder steps share (< span)
  int max_start_size = 128;  // cap of the kept prefix (the official start_size rule)
};

// FastKVzip (methods/fastkvzip.h): KVzip-style scores predicted by trained per-layer gates.
struct FastKvzipParams {
  std::string gates;           // safetensors: the per-layer gate weights (methods/fastkvzip.h)
  bool layerwise = false;      // the same share pruned in every layer (else one top-k over layers)
  int n_sink = 4;              // first positions always kept
  int window_size = 4096;      // recent positions kept when L >= 32000 (chunked-prefill regime)
  double window_ratio = 0.02;  // recent positions kept when L < 32000: max(1, int(L·ratio))
};

// Merging (methods/merging.h, kvpress MergingPress): a scorer's top-k whose evicted values are
// folded into their most key-similar kept entry.
struct MergingParams {
  std::string scorer;                 // the wrapped scorer's configuration
  double similarity_threshold = 0.0;  // least key cosine similarity for a merge, in [0, 1]
  double merge_fraction = 1.0;        // share of evicted tokens (most similar first) merged, (0, 1]
};

// ThinK (methods/think.h; kvpress ThinKPress): prunes key channels, keeps every position.
struct ThinkParams {
  double key_channel_compression_ratio = 0.0;  // share of each head's key channels zeroed
  int window_size = 32;                        // last queries whose energy scores the channels
};

// KVCompose (methods/kvcompose.h; kvpress KVComposePress): attention of a repeated-context pass,
// aggregated over the pass's rows (agg_task), each KV group's query heads (agg_group) and, for the
// structured layer counts, the heads' rank-ordered scores (agg_head).
enum class KvcomposeAggregation { max, mean };

struct KvcomposeParams {
  bool structured = true;  // every head of a layer keeps the same count (composite tokens)
  KvcomposeAggregation agg_task = KvcomposeAggregation::max;    // over the pass's query rows
  KvcomposeAggregation agg_group = KvcomposeAggregation::mean;  // over a KV group's query heads
  KvcomposeAggregation agg_head = KvcomposeAggregation::mean;   // over KV heads, rank by rank
  bool add_v_norm = false;                                      // scores × ‖v_j‖
  bool add_mean_across_heads = true;  // scores + the layer's mean over KV heads
  int keep_token_lower_bound = 0;     // least tokens kept per layer (and per head's best)
};

// Finch (methods/finch.h; kvpress FinchPress): SnapKV-style attention of the question's rows.
struct FinchParams {
  int window = 64;               // window rows when the view has no question (query-agnostic)
  int chunk_length = 0;          // compress chunks of this many positions separately; 0 = one chunk
  bool normalize_scores = true;  // weight each window row's attention by its position (kvpress)
  bool rerotate_keys = true;     // re-rotate kept keys to contiguous positions (CPU engine only)
};

// LU-KV (methods/lukv.h; kvpress LUKVPress): per-(layer, KV head) budgets from a precomputed budget
// curve (a .npy file named in the manifest) around a scorer; sink and recent positions protected.
struct LukvParams {
  std::string scorer;     // the wrapped scorer's configuration (the one the curve was made for)
  std::string curve;      // .npy float [99, layers, KV heads]: prune ratio per target index
  int sink = 4;           // first positions protected (kvpress `sink`)
  int recent_window = 1;  // last positions protected (kvpress `window`)
};

// Block (methods/block.h; kvpress BlockPress): a scorer's top-k taken block by block, each block
// scored together with the survivors of the previous ones.
struct BlockParams {
  std::string scorer;    // the wrapped scorer's configuration
  int block_size = 128;  // positions added per step
};

// R-KV (methods/rkv.h; Cai et al. 2025, Zefan-Cai/R-KV rkv/compression/r1_kv.py): importance
// from the window queries' attention minus redundancy from key cosine similarity. Defaults are the
// official code's (R1KV.__init__, run_math.py); its README recommends λ = 0.1.
struct RkvParams {
  int window = 8;                     // observation window α (last queries; protected positions)
  int kernel_size = 7;                // max-pool kernel over the importance
  double mix_lambda = 0.07;           // λ in Z = λ·I − (1−λ)·R
  double similarity_threshold = 0.5;  // cosine above which a key has a redundant neighbour
};

// One alternative per line (kept out of clang-format so that adding a method is a one-line diff).
// clang-format off
using MethodParams = std::variant<
    std::monostate,
    FullParams,
    RandomParams,
    KnormParams,
    StreamingLlmParams,
    SnapKvParams,
    TovaParams,
    ObservedAttentionParams,
    H2oParams,
    ExpectedAttentionParams,
    KeyDiffParams,
    AdaKvParams,
    PyramidKvParams,
    ChunkKvParams,
    CriticalKvParams,
    DefensiveKvParams,
    LayerDefensiveKvParams,
    ReFreeKvParams,
    LagKvParams,
    CurParams,
    SimLayerKvParams,
    NonCausalAttentionParams,
    LeverageParams,
    CompactorParams,
    CapParams,
    CakeParams,
    SqueezeAttentionParams,
    PerLayerCompressionParams,
    ComposedParams,
    KeyRerotationParams,
    ChunkParams,
    EntropyGatedChunkKvParams,
    CriticalAdaKvParams,
    QFilterParams,
    ExpectedAttentionStatsParams,
    DuoAttentionParams,
    KvzipParams,
    HeadKvParams,
    LaCacheParams,
    FastKvzipParams,
    MergingParams,
    ThinkParams,
    KvcomposeParams,
    FinchParams,
    LukvParams,
    BlockParams,
    RkvParams,
    KvzapParams,
    DmsParams,
    KvgradParams,
    RestoreKvParams
    // to add one, insert ",\n    NewParams" right before this comment line
    >;
// clang-format on

// The observation window a method's own parameters declare (0 if it has none).
inline int declared_window(const MethodParams& params) {
  return std::visit(
      [](const auto& p) -> int {
        if constexpr (requires { p.window; }) {
          return p.window;
        } else {
          return 0;
        }
      },
      params);
}

// The wrapped scorer's configuration name of a wrapper (adakv, chunkkv, criticalkv), or nullptr.
inline const std::string* scorer_reference(const MethodParams& params) {
  return std::visit(
      [](const auto& p) -> const std::string* {
        if constexpr (requires { p.scorer; }) {
          return &p.scorer;
        } else {
          return nullptr;
        }
      },
      params);
}

}  // namespace kvaudit::methods
