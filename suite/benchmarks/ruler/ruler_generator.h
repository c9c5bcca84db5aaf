// The native RULER generator (docs/design/benchmarks.md §RULER; what kvaudit changes:
// docs/BENCHMARKS.md "RULER (native generator)"): the 13 tasks of suite/benchmarks/task_catalog.h
// with RULER's templates, counts and answer formats, generated deterministically from (study seed,
// task, nominal length, instance index) — see ruler_random.h — and fitted to the nominal length L
// with the tokenizer (and chat template) they will be measured with.
//
// Length fitting, exact by construction:
//  1. per task, a probe instance (a reserved index) is rendered at RULER's probe size
//     (`incremental`), giving tokens per haystack unit; from that estimate a doubling search and a
//     bisection find the largest haystack size whose probe prompt fits;
//  2. per instance, starting from that size, a galloping search (steps 1, 2, 4, … up or down)
//     followed by a bisection finds the largest size at which THIS instance fits:
//        measured prompt tokens (prompt_measure.h: chat template, context + question + answer
//        prefix) + max_new_tokens ≤ L;
//  3. the instance keeps the text of the largest size measured to fit, so its stored token counts
//     are those of its final prompt (re-measured, never estimated), and it never exceeds L.
// Token counts are close to, not exactly, monotone in the size (e.g. needle depths move with the
// sentence count); the search then finds a local maximum, which still fits (step 3). RULER itself
// searches once per task and then drops whole increments (500 essay words) per sample, which can
// leave samples far below L; kvaudit's per-instance search keeps every instance close to L.
// A task whose smallest haystack does not fit L is an InputError.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_instance.h"

namespace kvaudit::benchmarks::ruler {

struct Essay;
struct QaDataset;
struct WordLists;
class TaskBuilder;

struct RulerConfig {
  std::uint64_t seed = 42;
  std::int64_t length = 0;        // nominal L (tokens, prompt + max_new_tokens)
  std::string essay = "builtin";  // "builtin" or a text file (niah essay tasks)
  std::string squad;              // SQuAD v2 dev JSON (qa_1); empty: not given
  std::string hotpotqa;           // HotpotQA dev-distractor JSON (qa_2); empty: not given
};

// "all" or a comma-separated list -> task names in catalogue order, each checked (InputError naming
// the unknown task and listing the known ones; duplicates are an error).
std::vector<std::string> parse_ruler_task_list(std::string_view text);

class RulerGenerator {
 public:
  // `measurer` (and its tokenizer) must outlive the generator. Throws InputError for a bad config
  // (length < 256 or > 2^24).
  RulerGenerator(RulerConfig config, const PromptMeasurer& measurer);
  ~RulerGenerator();
  RulerGenerator(const RulerGenerator&) = delete;
  RulerGenerator& operator=(const RulerGenerator&) = delete;

  // One instance. Loads the data the task needs on first use (InputError for an unknown task, a
  // missing --squad/--hotpotqa, or a malformed file).
  RulerInstance generate(std::string_view task, std::int64_t index);
  std::vector<RulerInstance> generate_range(std::string_view task, std::int64_t first,
                                            std::int64_t count);

  const RulerConfig& config() const { return config_; }
  // The essay in use once loaded (nullptr before), for "repeated ×k" summaries.
  const Essay* essay() const { return essay_.get(); }

 private:
  struct TaskState;
  TaskState& state_of(std::string_view task);

  RulerConfig config_;
  const PromptMeasurer& measurer_;
  std::unique_ptr<Essay> essay_;
  std::unique_ptr<QaDataset> squad_;
  std::unique_ptr<QaDataset> hotpotqa_;
  std::map<std::string, std::unique_ptr<TaskState>, std::less<>> tasks_;
};

}  // namespace kvaudit::benchmarks::ruler
