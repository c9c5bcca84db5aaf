// The cross-tokenizer pitfall, reproduced on purpose (docs/design/benchmarks.md §Tokenizer-length
// pitfall, §Tokenizer check): RULER
// instances are sized with a generation tokenizer A (and its chat template; kvpress's published
// RULER set: Llama-3.1's tokenizer, no chat template) and then re-measured with the evaluated
// model's tokenizer B and chat template against the model's limit (tokenizer_check.h). Shared by
// `kvaudit generate ruler --generation-tokenizer PATH` and `kvaudit plan` for a manifest benchmark
// with `generation_tokenizer` (docs/MANIFEST.md).
//
//  * TokenizerSide: a loaded tokenizer together with the chat template prompts are measured with;
//  * model_max_positions: max_position_embeddings of an HF directory (config.json) or a GGUF file
//    (<arch>.context_length);
//  * generate_ruler_set: the instances of `tasks` x [first, first + count) fitted with one side;
//  * format_cross_tokenizer_report: the per-task report of the pitfall — nominal L, A's median
//    length, B's min / median / max, ratio B median / A median, the number excluded, and the
//    reason of the first excluded instance of each task. Lengths are prompt + max_new_tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runners/model/chat/chat_template.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/benchmarks/ruler/ruler_instance.h"
#include "suite/benchmarks/tokenizer_check.h"

namespace kvaudit::benchmarks::ruler {

// A tokenizer (loaded with model::load_tokenizer: an HF model directory, tokenizer.json,
// tokenizer.model or a .gguf file) and the chat template its prompts are measured with.
class TokenizerSide {
 public:
  TokenizerSide(const std::filesystem::path& path, model::ChatTemplateKind chat_template);
  TokenizerSide(const TokenizerSide&) = delete;
  TokenizerSide& operator=(const TokenizerSide&) = delete;

  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  const PromptMeasurer& measurer() const { return measurer_; }

 private:
  std::unique_ptr<model::Tokenizer> tokenizer_;
  PromptMeasurer measurer_;
};

// max_position_embeddings of the model at `model_path` (an HF directory or a .gguf file); throws
// model::ModelInputError naming the file when it cannot be read.
std::int64_t model_max_positions(const std::filesystem::path& model_path);

struct GeneratedSet {
  std::vector<RulerInstance> instances;  // task by task, index order within a task
  std::string generation;                // PromptMeasurer::description() of the generation side
  std::optional<std::string> essay;      // "builtin (1893 words)" once the essay was used
  double seconds = 0;                    // wall time of the generation
};

// Generates `count` instances per task starting at index `first`, fitted with `generation`.
GeneratedSet generate_ruler_set(const RulerConfig& config, std::span<const std::string> tasks,
                                std::int64_t first, std::int64_t count,
                                const PromptMeasurer& generation);

// The pitfall report: one header line per side, the limit, a table with one row per task and the
// reason of the first excluded instance of each task (with the count of the others).
std::string format_cross_tokenizer_report(const std::string& generation_description,
                                          const TokenizerCheckReport& report);

}  // namespace kvaudit::benchmarks::ruler
