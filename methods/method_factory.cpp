// make_method / make_scorer (method_factory.h): one constructor call per catalogue method, fed
// from the typed parameters (method_params.h), never from parameter names.
#include "methods/method_factory.h"

#include <stdexcept>
#include <type_traits>
#include <variant>

#include "methods/adakv.h"
#include "methods/block.h"
#include "methods/cake.h"
#include "methods/cap.h"
#include "methods/chunk.h"
#include "methods/chunkkv.h"
#include "methods/compactor.h"
#include "methods/composed.h"
#include "methods/critical_adakv.h"
#include "methods/criticalkv.h"
#include "methods/cur.h"
#include "methods/defensivekv.h"
#include "methods/dms.h"
#include "methods/duo_attention.h"
#include "methods/entropy_gated_chunkkv.h"
#include "methods/expected_attention.h"
#include "methods/expected_attention_stats.h"
#include "methods/fastkvzip.h"
#include "methods/finch.h"
#include "methods/full.h"
#include "methods/h2o.h"
#include "methods/headkv.h"
#include "methods/key_rerotation.h"
#include "methods/keydiff.h"
#include "methods/knorm.h"
#include "methods/kvcompose.h"
#include "methods/kvgrad.h"
#include "methods/kvzap.h"
#include "methods/kvzip.h"
#include "methods/lacache.h"
#include "methods/lagkv.h"
#include "methods/layer_defensivekv.h"
#include "methods/leverage.h"
#include "methods/lukv.h"
#include "methods/merging.h"
#include "methods/non_causal_attention.h"
#include "methods/observed_attention.h"
#include "methods/per_layer_compression.h"
#include "methods/pyramidkv.h"
#include "methods/qfilter.h"
#include "methods/random.h"
#include "methods/refreekv.h"
#include "methods/restorekv.h"
#include "methods/rkv.h"
#include "methods/scorer_method.h"
#include "methods/simlayerkv.h"
#include "methods/snapkv.h"
#include "methods/squeezeattention.h"
#include "methods/streaming_llm.h"
#include "methods/think.h"
#include "methods/tova.h"

namespace kvaudit::methods {
namespace {

[[noreturn]] void fail_method(const ResolvedMethod& m, const std::string& what) {
  throw std::invalid_argument(m.label() + ": " + what);
}

template <typename T>
inline constexpr bool kAlwaysFalse = false;

// The wrapped scorer of a wrapper (resolve_method has resolved and checked it).
std::shared_ptr<const Scorer> wrapped_scorer(const ResolvedMethod& m) {
  if (!m.scorer) fail_method(m, "has no resolved scorer");
  return make_scorer(*m.scorer);
}

}  // namespace

std::shared_ptr<const Scorer> make_scorer(const ResolvedMethod& m) {
  if (m.spec == nullptr || !m.spec->is_scorer) {
    fail_method(m, "'" + (m.spec != nullptr ? m.spec->id : std::string("?")) + "' is not a scorer");
  }
  return std::visit(
      [&](const auto& p) -> std::shared_ptr<const Scorer> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, RandomParams>) {
          return std::make_shared<RandomScorer>();
        } else if constexpr (std::is_same_v<P, KnormParams>) {
          return std::make_shared<KnormScorer>();
        } else if constexpr (std::is_same_v<P, StreamingLlmParams>) {
          return std::make_shared<StreamingLlmScorer>(p.n_sink);
        } else if constexpr (std::is_same_v<P, SnapKvParams>) {
          return std::make_shared<SnapKvScorer>(p);
        } else if constexpr (std::is_same_v<P, PyramidKvParams>) {
          return std::make_shared<SnapKvScorer>(SnapKvParams{.variant = SnapKvVariant::kvpress,
                                                             .window = p.window,
                                                             .kernel_size = p.kernel_size,
                                                             .pooling = Pooling::avg});
        } else if constexpr (std::is_same_v<P, TovaParams>) {
          return std::make_shared<TovaScorer>(p.variant);
        } else if constexpr (std::is_same_v<P, ObservedAttentionParams>) {
          return std::make_shared<ObservedAttentionScorer>();
        } else if constexpr (std::is_same_v<P, ExpectedAttentionParams>) {
          return std::make_shared<ExpectedAttentionScorer>(p);
        } else if constexpr (std::is_same_v<P, KeyDiffParams>) {
          if (p.variant == KeyDiffVariant::block) {
            fail_method(
                m,
                "keydiff variant 'block' is a block-iterative selection, not a scorer; wrap "
                "keydiff variant 'oneshot'");
          }
          return std::make_shared<KeyDiffScorer>();
        } else if constexpr (std::is_same_v<P, LagKvParams>) {
          return std::make_shared<LagKvScorer>(p);
        } else if constexpr (std::is_same_v<P, CurParams>) {
          return std::make_shared<CurScorer>(p);
        } else if constexpr (std::is_same_v<P, NonCausalAttentionParams>) {
          return std::make_shared<NonCausalAttentionScorer>(p);
        } else if constexpr (std::is_same_v<P, LeverageParams>) {
          return std::make_shared<LeverageScorer>(p);
        } else if constexpr (std::is_same_v<P, CompactorParams>) {
          return std::make_shared<CompactorScorer>(p);
        } else if constexpr (std::is_same_v<P, CapParams>) {
          return std::make_shared<CapScorer>(p);
        } else if constexpr (std::is_same_v<P, QFilterParams>) {
          return std::make_shared<QFilterScorer>(p);
        } else if constexpr (std::is_same_v<P, ExpectedAttentionStatsParams>) {
          return std::make_shared<ExpectedAttentionStatsScorer>(p);
        } else if constexpr (std::is_same_v<P, KvzapParams>) {
          return std::make_shared<KvzapScorer>(p);
        } else {
          fail_method(
              m,
              "has no scorer that wrappers can reuse (its selection is not a per-head top-k "
              "of one score tensor)");
        }
      },
      m.params);
}

std::unique_ptr<Method> make_method(const ResolvedMethod& m) {
  std::unique_ptr<Method> method = std::visit(
      [&](const auto& p) -> std::unique_ptr<Method> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, std::monostate>) {
          fail_method(m, "has no catalogue parameters");
        } else if constexpr (std::is_same_v<P, FullParams>) {
          return std::make_unique<FullMethod>();
        } else if constexpr (std::is_same_v<P, PyramidKvParams>) {
          return std::make_unique<PyramidKvMethod>(p);
        } else if constexpr (std::is_same_v<P, KeyDiffParams>) {
          if (p.variant == KeyDiffVariant::block) {
            return std::make_unique<BlockKeyDiffMethod>(p.block_size);
          }
          return std::make_unique<ScorerMethod>(make_scorer(m));
        } else if constexpr (std::is_same_v<P, AdaKvParams>) {
          return std::make_unique<AdaKvMethod>(wrapped_scorer(m), p.alpha, p.variant);
        } else if constexpr (std::is_same_v<P, ChunkKvParams>) {
          return std::make_unique<ChunkKvMethod>(wrapped_scorer(m), p.chunk_length);
        } else if constexpr (std::is_same_v<P, CriticalKvParams>) {
          return std::make_unique<ScorerMethod>(std::make_shared<CriticalKvScorer>(
              wrapped_scorer(m), p.first_stage_ratio, p.epsilon));
        } else if constexpr (std::is_same_v<P, DefensiveKvParams>) {
          return std::make_unique<DefensiveKvMethod>(p.window);
        } else if constexpr (std::is_same_v<P, LayerDefensiveKvParams>) {
          return std::make_unique<LayerDefensiveKvMethod>(p.window);
        } else if constexpr (std::is_same_v<P, ReFreeKvParams>) {
          return std::make_unique<ReFreeKvMethod>(p.window);
        } else if constexpr (std::is_same_v<P, H2oParams>) {
          return std::make_unique<H2oMethod>(p.heavy_fraction);
        } else if constexpr (std::is_same_v<P, LagKvParams> || std::is_same_v<P, CurParams>) {
          return std::make_unique<ScorerMethod>(make_scorer(m));
        } else if constexpr (std::is_same_v<P, SimLayerKvParams>) {
          return std::make_unique<SimLayerKvMethod>(p);
        } else if constexpr (std::is_same_v<P, KvzipParams>) {
          return std::make_unique<KvzipMethod>(p);
        } else if constexpr (std::is_same_v<P, KvgradParams>) {
          return std::make_unique<KvgradMethod>(p);
        } else if constexpr (std::is_same_v<P, RestoreKvParams>) {
          return std::make_unique<RestoreKvMethod>(p);
        } else if constexpr (std::is_same_v<P, CakeParams>) {
          return std::make_unique<CakeMethod>(p);
        } else if constexpr (std::is_same_v<P, SqueezeAttentionParams>) {
          return std::make_unique<SqueezeAttentionMethod>(wrapped_scorer(m), p.class3_share);
        } else if constexpr (std::is_same_v<P, NonCausalAttentionParams> ||
                             std::is_same_v<P, LeverageParams> ||
                             std::is_same_v<P, CompactorParams> || std::is_same_v<P, CapParams>) {
          return std::make_unique<ScorerMethod>(make_scorer(m));
        } else if constexpr (std::is_same_v<P, PerLayerCompressionParams>) {
          return std::make_unique<PerLayerCompressionMethod>(wrapped_scorer(m),
                                                             p.compression_ratios);
        } else if constexpr (std::is_same_v<P, ComposedParams>) {
          std::vector<std::shared_ptr<const Scorer>> presses;
          std::shared_ptr<const ThinkMethod> key_channels;  // think: the last press (think.h)
          for (std::size_t i = 0; i < m.stages.size(); ++i) {
            if (const auto* think = std::get_if<ThinkParams>(&m.stages[i]->params)) {
              if (i + 1 != m.stages.size()) fail_method(m, "think must be the last of its presses");
              key_channels = std::make_shared<const ThinkMethod>(*think);
            } else {
              presses.push_back(make_scorer(*m.stages[i]));
            }
          }
          if (m.stages.size() != p.presses.size()) fail_method(m, "has unresolved presses");
          return std::make_unique<ComposedMethod>(std::move(presses), p.compression_ratios,
                                                  std::move(key_channels));
        } else if constexpr (std::is_same_v<P, KeyRerotationParams>) {
          return std::make_unique<KeyRerotationMethod>(wrapped_scorer(m));
        } else if constexpr (std::is_same_v<P, ChunkParams>) {
          return std::make_unique<ChunkMethod>(wrapped_scorer(m), p.chunk_length);
        } else if constexpr (std::is_same_v<P, EntropyGatedChunkKvParams>) {
          return std::make_unique<EntropyGatedChunkKvMethod>(wrapped_scorer(m), p.chunk_length,
                                                             p.low_entropy_chunk_length);
        } else if constexpr (std::is_same_v<P, CriticalAdaKvParams>) {
          return std::make_unique<CriticalAdaKvMethod>(wrapped_scorer(m), p.alpha, p.epsilon,
                                                       p.first_stage_ratio);
        } else if constexpr (std::is_same_v<P, HeadKvParams>) {
          return std::make_unique<HeadKvMethod>(p);
        } else if constexpr (std::is_same_v<P, LaCacheParams>) {
          return std::make_unique<LaCacheMethod>(p);
        } else if constexpr (std::is_same_v<P, QFilterParams> ||
                             std::is_same_v<P, ExpectedAttentionStatsParams> ||
                             std::is_same_v<P, KvzapParams>) {
          return std::make_unique<ScorerMethod>(make_scorer(m));
        } else if constexpr (std::is_same_v<P, DmsParams>) {
          return std::make_unique<DmsMethod>(wrapped_scorer(m), p.sliding_window_size, p.decoding);
        } else if constexpr (std::is_same_v<P, DuoAttentionParams>) {
          return std::make_unique<DuoAttentionMethod>(p);
        } else if constexpr (std::is_same_v<P, MergingParams>) {
          return std::make_unique<MergingMethod>(
              wrapped_scorer(m), MergeRule{.similarity_threshold = p.similarity_threshold,
                                           .merge_fraction = p.merge_fraction});
        } else if constexpr (std::is_same_v<P, KvcomposeParams>) {
          return std::make_unique<KvcomposeMethod>(p);
        } else if constexpr (std::is_same_v<P, FinchParams>) {
          return std::make_unique<FinchMethod>(p);
        } else if constexpr (std::is_same_v<P, ThinkParams>) {
          return std::make_unique<ThinkMethod>(p);
        } else if constexpr (std::is_same_v<P, FastKvzipParams>) {
          return std::make_unique<FastKvzipMethod>(p);
        } else if constexpr (std::is_same_v<P, LukvParams>) {
          return std::make_unique<LukvMethod>(wrapped_scorer(m), read_lukv_curve(p.curve), p.curve,
                                              p.sink, p.recent_window);
        } else if constexpr (std::is_same_v<P, BlockParams>) {
          return std::make_unique<BlockMethod>(wrapped_scorer(m), p.block_size);
        } else if constexpr (std::is_same_v<P, RkvParams>) {
          return std::make_unique<ScorerMethod>(std::make_shared<RkvScorer>(p));
        } else if constexpr (std::is_same_v<P, RandomParams> || std::is_same_v<P, KnormParams> ||
                             std::is_same_v<P, StreamingLlmParams> ||
                             std::is_same_v<P, SnapKvParams> || std::is_same_v<P, TovaParams> ||
                             std::is_same_v<P, ObservedAttentionParams> ||
                             std::is_same_v<P, ExpectedAttentionParams>) {
          return std::make_unique<ScorerMethod>(make_scorer(m));
        } else {
          static_assert(kAlwaysFalse<P>, "make_method: a MethodParams alternative is not built");
        }
      },
      m.params);
  method->set_parameters(m.params);
  return method;
}

std::unique_ptr<Method> make_method(const MethodConfig& config, const ConfigResolver& resolve) {
  return make_method(resolve_method(config, resolve));
}

std::shared_ptr<const Scorer> make_scorer(const MethodConfig& config,
                                          const ConfigResolver& resolve) {
  return make_scorer(resolve_method(config, resolve));
}

}  // namespace kvaudit::methods
