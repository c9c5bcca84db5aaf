// SQuAD v2 / HotpotQA readers for RULER qa_1 / qa_2 (see qa_data.h).
#include "suite/benchmarks/ruler/qa_data.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "suite/benchmarks/ruler/text_file.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string prefix) : prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(prefix_ + ": " + path + ": " + what);
  }
  const json& field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(path + (path.empty() ? "" : ".") + key, "missing");
    return *it;
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array())
      fail(join(path, key), "expected an array, found " + std::string(v.type_name()));
    return v;
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    return as_string(field(obj, path, key), join(path, key));
  }
  std::string as_string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, found " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string at(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

 private:
  std::string prefix_;
};

json parse_json(std::string_view text, const std::string& prefix) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    throw InputError(prefix + ":" + std::to_string(line_of_offset(text, offset)) +
                     ": not valid JSON (" + e.what() + ")");
  }
}

// Sorted unique documents and the index of each.
std::map<std::string, std::size_t> index_documents(std::vector<std::string>& docs) {
  std::sort(docs.begin(), docs.end());
  docs.erase(std::unique(docs.begin(), docs.end()), docs.end());
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < docs.size(); ++i) index.emplace(docs[i], i);
  return index;
}

void require_questions(const QaDataset& d, const std::string& prefix) {
  if (d.questions.empty()) throw InputError(prefix + ": no answerable question");
}

}  // namespace

QaDataset parse_squad(std::string_view text, const std::string& source) {
  const std::string prefix = "squad file " + source;
  const Reader r(prefix);
  const json root = parse_json(text, prefix);
  const json& data = r.array(root, "", "data");
  QaDataset d;
  d.source = source;
  for (std::size_t a = 0; a < data.size(); ++a) {
    const std::string ap = Reader::at("data", a);
    const json& paragraphs = r.array(data[a], ap, "paragraphs");
    for (std::size_t p = 0; p < paragraphs.size(); ++p) {
      d.documents.push_back(r.string(paragraphs[p], Reader::at(ap + ".paragraphs", p), "context"));
    }
  }
  const auto index = index_documents(d.documents);
  for (std::size_t a = 0; a < data.size(); ++a) {
    const std::string ap = Reader::at("data", a);
    const json& paragraphs = data[a]["paragraphs"];
    std::vector<std::size_t> article_docs;
    for (const auto& p : paragraphs)
      article_docs.push_back(index.at(p["context"].get<std::string>()));
    for (std::size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string pp = Reader::at(ap + ".paragraphs", p);
      const std::size_t own = index.at(paragraphs[p]["context"].get<std::string>());
      const json& qas = r.array(paragraphs[p], pp, "qas");
      for (std::size_t q = 0; q < qas.size(); ++q) {
        const std::string qp = Reader::at(pp + ".qas", q);
        const json& impossible = r.field(qas[q], qp, "is_impossible");
        if (!impossible.is_boolean()) r.fail(qp + ".is_impossible", "expected true or false");
        if (impossible.get<bool>()) continue;
        QaQuestion question;
        question.query = r.string(qas[q], qp, "question");
        const json& answers = r.array(qas[q], qp, "answers");
        for (std::size_t k = 0; k < answers.size(); ++k) {
          question.answers.push_back(r.string(answers[k], Reader::at(qp + ".answers", k), "text"));
        }
        if (question.answers.empty())
          r.fail(qp + ".answers", "an answerable question without answers");
        question.gold_docs = {own};
        for (const std::size_t doc : article_docs) {
          if (doc != own) question.more_docs.push_back(doc);
        }
        d.questions.push_back(std::move(question));
      }
    }
  }
  require_questions(d, prefix);
  return d;
}

QaDataset parse_hotpotqa(std::string_view text, const std::string& source) {
  const std::string prefix = "hotpotqa file " + source;
  const Reader r(prefix);
  const json root = parse_json(text, prefix);
  if (!root.is_array()) r.fail("(top level)", "expected an array of questions");
  QaDataset d;
  d.source = source;
  std::vector<std::vector<std::string>> question_docs;
  for (std::size_t i = 0; i < root.size(); ++i) {
    const std::string ip = Reader::at("", i);
    const json& context = r.array(root[i], ip, "context");
    std::vector<std::string> docs;
    for (std::size_t c = 0; c < context.size(); ++c) {
      const std::string cp = Reader::at(ip + ".context", c);
      const json& pair = context[c];
      if (!pair.is_array() || pair.size() != 2) r.fail(cp, "expected [title, [sentences]]");
      std::string doc = r.as_string(pair[0], cp + "[0]") + "\n";
      if (!pair[1].is_array()) r.fail(cp + "[1]", "expected an array of sentences");
      for (std::size_t s = 0; s < pair[1].size(); ++s) {
        doc += r.as_string(pair[1][s], Reader::at(cp + "[1]", s));
      }
      docs.push_back(std::move(doc));
    }
    d.documents.insert(d.documents.end(), docs.begin(), docs.end());
    question_docs.push_back(std::move(docs));
  }
  const auto index = index_documents(d.documents);
  for (std::size_t i = 0; i < root.size(); ++i) {
    const std::string ip = Reader::at("", i);
    QaQuestion question;
    question.query = r.string(root[i], ip, "question");
    question.answers = {r.string(root[i], ip, "answer")};
    for (const auto& doc : question_docs[i]) question.gold_docs.push_back(index.at(doc));
    if (question.gold_docs.empty()) r.fail(ip + ".context", "no context paragraphs");
    d.questions.push_back(std::move(question));
  }
  require_questions(d, prefix);
  return d;
}

QaDataset read_squad(const std::filesystem::path& path) {
  return parse_squad(read_text_file(path, "squad"), path.string());
}

QaDataset read_hotpotqa(const std::filesystem::path& path) {
  return parse_hotpotqa(read_text_file(path, "hotpotqa"), path.string());
}

}  // namespace kvaudit::benchmarks::ruler
