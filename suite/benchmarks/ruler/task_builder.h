// The interface between the RULER length search (ruler_generator.cpp) and the five task families. A
// TaskBuilder knows one task's configuration (synthetic.yaml, docs/design/benchmarks.md §RULER
// tasks); its draft(index) makes the size-independent draws of one instance and returns a function
// that renders the instance's full text (RULER input + answer prefix) for a haystack of `units`
// units (essay words, noise sentences, filler needles, documents or list words). Rendering twice
// with the same units gives the same text: the size-dependent draws restart from the instance's
// layout stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "suite/benchmarks/task_catalog.h"

namespace kvaudit::benchmarks::ruler {

struct Essay;
struct WordLists;
struct QaDataset;

struct TaskText {
  std::string text;  // RULER's input followed by its answer prefix
  std::vector<std::string> answers;
};

using InstanceDraft = std::function<TaskText(std::size_t units)>;

struct BuilderContext {
  std::uint64_t seed = 0;
  std::uint32_t task_id = 0;         // position in the RULER task catalogue
  std::uint32_t length = 0;          // nominal length L
  const Essay* essay = nullptr;      // essay-haystack niah tasks
  const WordLists* words = nullptr;  // niah keys, cwe
  const QaDataset* qa = nullptr;     // qa_1 / qa_2
  // Tokens of a plain text with the generation tokenizer and no special tokens (RULER's
  // text_to_tokens): sizes vt's one-shot example to 500 tokens as RULER does.
  std::function<std::size_t(std::string_view)> count_raw_tokens;
};

class TaskBuilder {
 public:
  virtual ~TaskBuilder() = default;
  virtual std::string_view unit_name() const = 0;  // "word", "sentence", "needle", "document"
  virtual std::size_t min_units() const = 0;
  // RULER's `incremental`: the probe size for the tokens-per-unit estimate.
  virtual std::size_t probe_units() const = 0;
  // The most units the task's data allows (cwe: its vocabulary); beyond is an input error.
  virtual std::size_t max_units() const { return std::numeric_limits<std::size_t>::max() / 4; }
  virtual InstanceDraft draft(std::uint32_t index) const = 0;
};

std::unique_ptr<TaskBuilder> make_niah_builder(const TaskSpec& spec, const BuilderContext& context);
std::unique_ptr<TaskBuilder> make_variable_tracking_builder(const BuilderContext& context);
std::unique_ptr<TaskBuilder> make_common_words_builder(const BuilderContext& context);
std::unique_ptr<TaskBuilder> make_freq_words_builder(const BuilderContext& context,
                                                     int max_new_tokens);
std::unique_ptr<TaskBuilder> make_qa_builder(const BuilderContext& context);

}  // namespace kvaudit::benchmarks::ruler
