// ComposedMethod: scorer presses applied one after another, each to what the previous one kept
// (kvpress 0.5.5 kvpress/presses/composed_press.py ComposedPress, with ScorerPresses). For each
// layer, starting from all L positions in order, for press i with ratio r_i (skipped when r_i = 0,
// as kvpress's ScorerPress returns the cache unchanged):
//   the press scores the CURRENT cache of length L_i — its keys and values in the order the
//   previous press left them (kvpress gathers kept rows in torch.topk order: best first), the
//   queries being the prefill's own (kvpress recomputes them from the unchanged hidden states),
//   CaptureSubset — and each KV head keeps its max(1, floor(L_i(1−r_i))) best (torch.topk order,
//   which becomes the next press's cache order); the kept set is the original positions of the
//   final cache, ascending.
// Order matters for index-based scorers: StreamingLLM's sinks and SnapKV's causal window mask and
// pooling apply to cache indices, so after a first press they act on the permuted cache exactly as
// in kvpress. The first press may be any scorer; later presses must not read attention column sums,
// query moments or all-queries rows (tied to the full prefill; kvpress's own docstring warns that
// ObservedAttention after a pruning press reads the unpruned attention) — checked at selection.
// Budget: ComposedPress has no settable ratio; it reports 1 − Π(1 − r_i), which a cell must ask
// for (wrapper_budgets.h). kvpress refuses AdaKV and KVzip inside; here presses are scorers, but
// the last press may be ThinK (think.h: key-channel pruning, kvpress ThinKPress), which keeps every
// position the scorers kept and zeroes, per (layer, KV head), the key channels it scores lowest
// over those kept keys (Selection::zeroed_key_channels); its entry of compression_ratios must be
// the ratio ThinKPress reports, key_channel_compression_ratio / 2, so that 1 − Π(1 − r_i) is
// ComposedPress's own.
#pragma once

#include <memory>
#include <vector>

#include "methods/method.h"
#include "methods/think.h"

namespace kvaudit::methods {

class ComposedMethod : public Method {
 public:
  // compression_ratios: one per scorer press, then (with a key-channel stage) ThinK's reported
  // ratio last.
  ComposedMethod(std::vector<std::shared_ptr<const Scorer>> presses,
                 std::vector<double> compression_ratios,
                 std::shared_ptr<const ThinkMethod> key_channel_stage = nullptr);
  Selection select(std::span<const LayerCapture> layers, const Budget& budget,
                   const SelectionContext& context) const override;
  int window_needed() const override;
  bool needs_column_sums() const override;
  bool needs_query_moments() const override;
  bool needs_all_queries() const override;
  bool needs_attention_input() const override;
  std::string name() const override;

 private:
  std::vector<std::shared_ptr<const Scorer>> presses_;
  std::vector<double> compression_ratios_;
  std::shared_ptr<const ThinkMethod> key_channel_stage_;  // null: positions only
};

}  // namespace kvaudit::methods
