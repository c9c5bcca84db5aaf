// RULER templates, str.format / str.replace equivalents and the kvpress split (ruler_templates.h).
#include "suite/benchmarks/ruler/ruler_templates.h"

#include <algorithm>
#include <array>

#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr FamilyTemplate kNiah = {
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all "
    "the special magic {type_needle_v} for {query} mentioned in the provided text?",
    " The special magic {type_needle_v} for {query} mentioned in the provided text are"};
constexpr FamilyTemplate kVariableTracking = {
    "Memorize and track the chain(s) of variable assignment hidden in the following "
    "text.\n\n{context}\nQuestion: Find all variables that are assigned the value {query} in the "
    "text above.",
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
    "variables are assigned the value {query}, they are: "};
constexpr FamilyTemplate kCommonWords = {
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common "
    "words in the above list?",
    " Answer: The top 10 words that appear most often in the list are:"};
constexpr FamilyTemplate kFreqWords = {
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. "
    "Please ignore the dots '....'. What are the three most frequently appeared words in the "
    "above coded text?",
    " Answer: According to the coded text above, the three most frequently appeared words are:"};
constexpr FamilyTemplate kQa = {
    "Answer the question based on the given documents. Only give me the answer and do not output "
    "any other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question "
    "based on the given documents. Only give me the answer and do not output any other "
    "words.\n\nQuestion: {query}",
    " Answer:"};

std::size_t rfind_any(std::string_view text, std::initializer_list<std::string_view> patterns) {
  std::size_t best = std::string_view::npos;
  for (const auto p : patterns) {
    const std::size_t at = text.rfind(p);
    if (at != std::string_view::npos && (best == std::string_view::npos || at > best)) best = at;
  }
  return best;
}

}  // namespace

Family family_from_name(std::string_view name) {
  if (name == "niah") return Family::niah;
  if (name == "variable_tracking") return Family::variable_tracking;
  if (name == "common_words_extraction") return Family::common_words_extraction;
  if (name == "freq_words_extraction") return Family::freq_words_extraction;
  if (name == "qa") return Family::qa;
  throw InternalError("RULER: unknown task family '" + std::string(name) + "'");
}

const FamilyTemplate& family_template(Family family) {
  switch (family) {
    case Family::niah:
      return kNiah;
    case Family::variable_tracking:
      return kVariableTracking;
    case Family::common_words_extraction:
      return kCommonWords;
    case Family::freq_words_extraction:
      return kFreqWords;
    case Family::qa:
      return kQa;
  }
  throw InternalError("RULER: bad family");
}

std::string format_template(
    std::string_view text,
    const std::vector<std::pair<std::string_view, std::string_view>>& fields) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      out += '{';
      i += 2;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      out += '}';
      i += 2;
    } else if (c == '{') {
      const std::size_t close = text.find('}', i);
      if (close == std::string_view::npos) throw InternalError("RULER template: unclosed '{'");
      const std::string_view name = text.substr(i + 1, close - i - 1);
      const auto it = std::find_if(fields.begin(), fields.end(),
                                   [&](const auto& f) { return f.first == name; });
      if (it == fields.end()) {
        throw InternalError("RULER template: no value for {" + std::string(name) + "}");
      }
      out += it->second;
      i = close + 1;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t i = 0;
  while (true) {
    const std::size_t at = text.find(from, i);
    if (at == std::string_view::npos) break;
    out.append(text.substr(i, at - i));
    out.append(to);
    i = at + from.size();
  }
  out.append(text.substr(i));
  return out;
}

PromptSplit split_ruler_prompt(Family family, std::string_view full_text) {
  std::size_t question_at = std::string_view::npos;
  std::string_view answer_pattern = "Answer:";
  switch (family) {
    case Family::niah:
      question_at =
          rfind_any(full_text, {"What is the special magic", "What are all the special magic"});
      answer_pattern = "The special magic";
      break;
    case Family::variable_tracking:
      question_at =
          rfind_any(full_text, {"Question: Find all variables that are assigned the value"});
      break;
    case Family::common_words_extraction:
      question_at =
          rfind_any(full_text, {"Question: What are the 10 most common words in the above list?"});
      break;
    case Family::freq_words_extraction:
      question_at = rfind_any(full_text, {"Question: Do not provide any explanation."});
      break;
    case Family::qa:
      question_at = rfind_any(full_text, {"Answer the question based on the given documents."});
      break;
  }
  if (question_at == std::string_view::npos) {
    throw InternalError("RULER split: the question pattern is missing from the prompt");
  }
  const std::size_t answer_at = full_text.find(answer_pattern, question_at);
  if (answer_at == std::string_view::npos) {
    throw InternalError("RULER split: the answer pattern is missing after the question");
  }
  return {std::string(full_text.substr(0, question_at)),
          std::string(full_text.substr(question_at, answer_at - question_at)),
          std::string(full_text.substr(answer_at))};
}

}  // namespace kvaudit::benchmarks::ruler
