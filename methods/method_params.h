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
using MethodParams =
    std::variant<std::monostate, FullParams, RandomParams, KnormParams, StreamingLlmParams,
                 SnapKvParams, TovaParams, ObservedAttentionParams, H2oParams,
                 ExpectedAttentionParams, KeyDiffParams, AdaKvParams, PyramidKvParams,
                 ChunkKvParams, CriticalKvParams, DefensiveKvParams, LayerDefensiveKvParams,
                 ReFreeKvParams>;

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
