// RULER's multi-question form for the reuse protocol (issue 19; docs/design/reuse.md §Data): one
// haystack with k needles and k separate questions, one per needle, each with its own answer, so
// that one compression of the context serves k questions.
//
// The instance is niah_multiquery's, byte for byte (RulerGenerator::generate("niah_multiquery",
// index): the same 4 keys and values, needle shuffle, depths, haystack and length fit), so no
// existing task or instance changes. Its combined question "What are all the special magic numbers
// for K1, K2, K3, and K4 mentioned in the provided text?" (answers V1…V4, in the same order) is
// replaced by one question per key, worded as RULER words a single-value niah question (the niah
// template singularised as for #q·#v = 1, niah_task.cpp):
//   question j:      "What is the special magic number for Kj mentioned in the provided text? "
//   answer prefix j: "The special magic number for Kj mentioned in the provided text is"
//   answers j:       [Vj]
// The context (including "Some special magic numbers are hidden … I will quiz you about the numbers
// afterwards.") is shared by every question. The keys are read back from the combined question
// (keys are adjective-noun words from the bundled lists, none containing ", "), and each (Kj, Vj)
// is checked against its needle "One of the special magic numbers for Kj is: Vj." occurring exactly
// once in the context (InternalError otherwise). Every question is measured with the context, and
// context tokens + question tokens + max_new_tokens ≤ L is checked (a single question is shorter
// than the combined one the instance was fitted with; InternalError if not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/benchmarks/ruler/ruler_instance.h"
#include "suite/benchmarks/task_catalog.h"

namespace kvaudit::benchmarks::ruler {

// The task whose instances the multi-question form splits.
inline constexpr std::string_view kMultiQuestionSourceTask = kRulerMultiQuestionTask;

struct RulerQuestion {
  std::string key;                   // the needle key asked about
  std::string question;              // kvpress split: the question part
  std::string answer_prefix;         // kvpress split: the answer prefix
  std::vector<std::string> answers;  // the needle's value
  std::int64_t question_tokens = 0;  // measured after the shared context (PromptMeasurer)
  std::size_t needle_offset = 0;     // byte offset of the key's needle in the context

  bool operator==(const RulerQuestion&) const = default;
};

struct RulerMultiQuestionInstance {
  RulerInstance shared;                  // the niah_multiquery instance, unchanged
  std::vector<RulerQuestion> questions;  // one per needle, in the combined question's order

  // Question j as a stand-alone RulerInstance: `shared` with its question, answer prefix, answers
  // and question tokens replaced (the full-KV reference of question j is run on this).
  RulerInstance question_instance(std::size_t j) const;

  bool operator==(const RulerMultiQuestionInstance&) const = default;
};

// Splits a niah_multiquery instance into its per-needle questions. `measurer` must be the one the
// instance was generated with. InternalError when `multiquery` is not a niah_multiquery instance
// or its keys and needles do not match.
RulerMultiQuestionInstance split_multi_question(const RulerInstance& multiquery,
                                                const PromptMeasurer& measurer);

// generator.generate("niah_multiquery", index) split by split_multi_question; `measurer` must be
// the generator's.
RulerMultiQuestionInstance generate_multi_question(RulerGenerator& generator,
                                                   const PromptMeasurer& measurer,
                                                   std::int64_t index);

}  // namespace kvaudit::benchmarks::ruler
