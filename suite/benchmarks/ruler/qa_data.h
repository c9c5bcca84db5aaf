// The documents and questions of RULER's qa_1 (SQuAD v2.0 dev) and qa_2 (HotpotQA dev-distractor),
// read as RULER's qa.py reads them (docs/design/benchmarks.md §RULER task families):
//  * SQuAD: documents = all unique paragraph `context`s, sorted; questions = every qas entry with
//    is_impossible false, in file order; its gold = its own paragraph, its preferred distractors
//    ("more") = the article's other paragraphs; answers = every answers[].text.
//  * HotpotQA: a document = title + "\n" + the concatenated sentences; documents = all unique
//    ones, sorted; question i = entry i, gold = all its context paragraphs, answers = [answer].
// Required fields and their types are checked: a missing or mistyped field is an InputError naming
// the file and the JSON path (e.g. "squad file x.json: data[0].paragraphs[1].qas[2].question:
// missing"); bad JSON names the line; a file without any usable question is refused.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::benchmarks::ruler {

struct QaQuestion {
  std::string query;
  std::vector<std::string> answers;
  std::vector<std::size_t> gold_docs;  // indices into QaDataset::documents
  std::vector<std::size_t> more_docs;  // SQuAD only: the article's other paragraphs
};

struct QaDataset {
  std::string source;  // the file
  std::vector<std::string> documents;
  std::vector<QaQuestion> questions;
};

QaDataset read_squad(const std::filesystem::path& path);
QaDataset read_hotpotqa(const std::filesystem::path& path);
// The same from text already in memory (`source` names it in errors): what the fuzz target drives.
QaDataset parse_squad(std::string_view text, const std::string& source);
QaDataset parse_hotpotqa(std::string_view text, const std::string& source);

}  // namespace kvaudit::benchmarks::ruler
