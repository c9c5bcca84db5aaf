// The generation tokenizer of a RULER benchmark: the manifest's benchmark field
// `generation_tokenizer` (docs/MANIFEST.md), a tokenizer path resolved against the manifest's
// directory. When it is set, instances are sized with it and no chat template (as `kvaudit plan`
// does for its tokenizer check, and as kvpress's published RULER set was sized: Llama-3.1's
// tokenizer, no template) and then checked with the evaluated model's tokenizer and chat template
// (the cross-tokenizer pitfall, reproduced on purpose); when it is absent, the evaluated model's
// own tokenizer and template size them.
#pragma once

#include <optional>
#include <string>

#include "runners/model/chat/chat_template.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::run {

struct GenerationTokenizer {
  std::string path;  // resolved against the manifest's directory
  model::ChatTemplateKind chat_template = model::ChatTemplateKind::none;
};

inline std::optional<GenerationTokenizer> generation_tokenizer_of(
    const manifest::Manifest& manifest, const manifest::Benchmark& benchmark) {
  if (benchmark.kind != benchmarks::BenchmarkKind::ruler || benchmark.generation_tokenizer.empty())
    return std::nullopt;
  return GenerationTokenizer{manifest.resolve(benchmark.generation_tokenizer).string(),
                             model::ChatTemplateKind::none};
}

}  // namespace kvaudit::run
