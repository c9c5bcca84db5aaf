// The benchmark instance of one unit, built with the EVALUATED model's tokenizer and chat template
// and tokenized as the unit runner feeds it (docs/design/protocols.md §Separate tokenization;
// docs/design/benchmarks.md §Tokenizer check):
//
//  * RULER: generated natively by suite/benchmarks/ruler (seed = the study seed, nominal length =
//    the benchmark's `length`, essay / SQuAD / HotpotQA paths from the manifest), fitted with the
//    evaluated tokenizer and chat template — or with the benchmark's generation tokenizer when the
//    manifest names one (generation_tokenizer.h; the cross-tokenizer pitfall, reproduced on
//    purpose) — and then checked (suite/benchmarks/tokenizer_check.h) with the evaluated side
//    against min(max_position_embeddings, the nominal length, the configured runtime context when
//    set), the limit `kvaudit plan` reports: an instance that does not fit is excluded with the
//    check's reason, never truncated.
//  * LongBench: record `instance` of "<data_dir>/<task>.jsonl" (file order), middle-truncated to
//    the benchmark's `length` (pred.py's max_length) by the evaluated tokenizer, rendered with the
//    model's chat template for every task (kvpress's rule, LongBenchChatRule::always, since kvaudit
//    runs the kvpress split), max_new_tokens = dataset2maxlen. An instance whose prompt +
//    max_new_tokens exceeds min(max_position_embeddings, the configured runtime context) is
//    excluded likewise.
//
// Tokens: runners/model/chat split_prompt renders the kvpress split (prefix + context | question |
// template suffix + answer prefix); the three parts are encoded SEPARATELY with
// add_special_tokens = false and special-token parsing on (the rendered context part carries BOS
// and the template head), giving unit::UnitTokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runners/model/chat/prompt_split.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"
#include "suite/benchmarks/longbench/context_groups.h"
#include "suite/benchmarks/longbench/longbench_instance.h"
#include "suite/benchmarks/longbench/longbench_jsonl.h"
#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/benchmarks/tokenizer_check.h"
#include "suite/manifest/manifest.h"
#include "suite/run/generation_tokenizer.h"
#include "suite/run/loaded_model.h"

namespace kvaudit::run {

struct UnitInstance {
  unit::UnitTokens tokens;
  std::vector<std::string> answers;
  std::vector<std::string> all_classes;  // LongBench classification tasks; empty otherwise
  int max_new_tokens = 0;
  std::int64_t nominal_length = 0;      // RULER: nominal L; LongBench: the truncation limit
  std::optional<std::string> excluded;  // why the instance is excluded (then nothing runs)
  // A reuse unit (docs/design/reuse.md): the answers of each of the context's questions, in the
  // order of tokens.reuse_questions; `answers` above is then empty.
  std::vector<std::vector<std::string>> question_answers;
};

// The three parts tokenized separately (see the top of this file).
unit::UnitTokens tokenize_prompt_parts(const model::Tokenizer& tokenizer,
                                       const model::PromptParts& parts);

// KVzip's reconstruction prompt ids (methods/extra_pass.h, UnitTokens::pass_prompt) as kvpress
// 0.5.5 KVzipPress builds them: with a chat template, the rendering of one user message
// "dummy context" + "\n" + 13 '#' (generation prompt on) split at that separator gives the suffix
// text, and its part before "dummy context" the template head (prefix_length = its token count);
// without one (none) the head is empty and the suffix "\n". Every text is encoded without added
// special tokens, parsing control-token literals (as HF's encode does).
methods::PassPrompt reconstruction_prompt(const model::Tokenizer& tokenizer,
                                          model::ChatTemplateKind kind);

// The instances of one (model, benchmark) pair. Keeps the RULER generator (and its per-task length
// search) and the loaded LongBench task files across units. `model` must outlive it.
class BenchmarkInstances {
 public:
  // Throws InputError / model::ModelInputError for a generation tokenizer that cannot be loaded.
  BenchmarkInstances(const manifest::Manifest& manifest, std::size_t benchmark_index,
                     const LoadedModel& model, std::optional<std::int64_t> configured_limit,
                     std::optional<GenerationTokenizer> generation);
  ~BenchmarkInstances();
  BenchmarkInstances(const BenchmarkInstances&) = delete;
  BenchmarkInstances& operator=(const BenchmarkInstances&) = delete;

  // Instance `index` of `task`. Throws InputError (naming the benchmark, task and what is wrong)
  // when it cannot be built: unreadable data, an index past a LongBench file's records, text the
  // tokenizer or chat template rejects.
  UnitInstance build(std::string_view task, std::int64_t index);

  // Context `index` of `task` with all its questions, for a reuse unit: RULER niah_multiquery
  // instance `index` in its multi-question form (one question per needle; excluded when any
  // question does not fit, checked as a plain instance is); LongBench the `index`-th group of the
  // task's records that share their split context (context_groups.h, file order). Every question
  // is tokenized separately after the shared context, whose tokens must come out the same for each
  // (InternalError otherwise). Throws InputError as build() does, and for an index past the groups.
  UnitInstance build_reuse(std::string_view task, std::int64_t index);

 private:
  UnitInstance build_ruler(std::string_view task, std::int64_t index);
  UnitInstance build_longbench(std::string_view task, std::int64_t index);
  UnitInstance build_ruler_reuse(std::string_view task, std::int64_t index);
  UnitInstance build_longbench_reuse(std::string_view task, std::int64_t index);
  const benchmarks::LongBenchTaskData& longbench_data(std::string_view task);
  // The instances of every record of a LongBench task and their context groups, built once.
  struct LongBenchGroups {
    std::vector<benchmarks::LongBenchInstance> instances;
    std::vector<benchmarks::LongBenchContextGroup> groups;
  };
  const LongBenchGroups& longbench_groups(std::string_view task);
  benchmarks::LongBenchChatOptions longbench_chat() const;
  // Appends question j (its split parts) to `out`'s reuse questions; the context part must equal
  // what `out` already holds (or sets it, for the first question).
  void add_reuse_question(UnitInstance& out, const model::PromptParts& parts,
                          std::string_view what) const;
  benchmarks::CheckLimits limits() const;

  const manifest::Manifest& manifest_;
  const manifest::Benchmark& benchmark_;
  const LoadedModel& model_;
  std::optional<std::int64_t> configured_limit_;
  benchmarks::ruler::PromptMeasurer evaluated_;
  std::unique_ptr<model::Tokenizer> generation_tokenizer_;
  std::unique_ptr<benchmarks::ruler::PromptMeasurer> generation_measurer_;
  std::unique_ptr<benchmarks::ruler::RulerGenerator> ruler_;
  std::map<std::string, benchmarks::LongBenchTaskData, std::less<>> longbench_;
  std::map<std::string, LongBenchGroups, std::less<>> longbench_groups_;
};

}  // namespace kvaudit::run
