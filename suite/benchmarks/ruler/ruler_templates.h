// RULER's prompt templates and answer prefixes (NVIDIA/RULER c3f5e3b,
// scripts/data/synthetic/constants.py; docs/design/benchmarks.md §RULER task families), the fixed
// strings its generators use, and kvpress's split of a RULER prompt into context / question /
// answer prefix (kvpress evaluation/benchmarks/ruler/create_huggingface_dataset.py;
// docs/design/benchmarks.md §RULER kvpress split).
// The strings are facts reproduced verbatim; the code around them is kvaudit's own.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvaudit::benchmarks::ruler {

enum class Family { niah, variable_tracking, common_words_extraction, freq_words_extraction, qa };

// "niah", "variable_tracking", ... as in task_catalog.h; throws InternalError for another name.
Family family_from_name(std::string_view name);

struct FamilyTemplate {
  std::string_view template_text;  // with {context}, {query} and family placeholders
  std::string_view answer_prefix;
};
const FamilyTemplate& family_template(Family family);

inline constexpr std::string_view kNoiseSentence =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
inline constexpr std::string_view kNeedleTemplate =
    "One of the special magic {type_needle_v} for {key} is: {value}.";
inline constexpr std::string_view kDocumentTemplate = "Document {i}:\n{document}";

// Python str.format for named fields: every "{name}" is replaced in one pass (replacement text is
// never re-scanned), "{{" / "}}" become "{" / "}". An unknown field throws InternalError.
std::string format_template(
    std::string_view text,
    const std::vector<std::pair<std::string_view, std::string_view>>& fields);

// Python str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

struct PromptSplit {
  std::string context;
  std::string question;
  std::string answer_prefix;
};

// kvpress's split of `full_text` (RULER input + answer prefix): context = everything before the
// LAST match of the family's question pattern, then the FIRST match of its answer pattern after
// it starts the answer prefix, the text between is the question. Patterns (regexes in kvpress,
// all literal here): niah "What is the special magic" | "What are all the special magic" and
// "The special magic" (case-sensitive); vt "Question: Find all variables that are assigned the
// value"; cwe "Question: What are the 10 most common words in the above list?"; fwe "Question: Do
// not provide any explanation."; qa "Answer the question based on the given documents."; the
// answer pattern of all but niah is "Answer:". Throws InternalError when a pattern is missing.
PromptSplit split_ruler_prompt(Family family, std::string_view full_text);

}  // namespace kvaudit::benchmarks::ruler
