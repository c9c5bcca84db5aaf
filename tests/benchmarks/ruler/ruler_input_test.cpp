// Readers of untrusted RULER input (essay, SQuAD v2, HotpotQA), task lists, the templates, the
// kvpress split, the sentence splitter and the RNG. No tokenizer needed (label parser).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "suite/benchmarks/ruler/essay.h"
#include "suite/benchmarks/ruler/qa_data.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/word_lists.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

const std::filesystem::path kData = std::filesystem::path(KVAUDIT_SOURCE_DIR) / "data" / "ruler";

std::filesystem::path write_temp(const std::string& name, const std::string& content) {
  const std::filesystem::path dir = KVAUDIT_RULER_TEST_TMP;
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// The message of the InputError `f` throws ("" if none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RulerInputs, BundledSquadAndHotpotqaSamplesParse) {
  const auto squad = read_squad(kData / "squad_v2_sample.json");
  EXPECT_EQ(squad.documents.size(), 7u);
  EXPECT_EQ(squad.questions.size(), 12u);  // the three is_impossible questions are dropped
  EXPECT_TRUE(std::is_sorted(squad.documents.begin(), squad.documents.end()));
  EXPECT_EQ(squad.questions[0].query, "Who founded Velmora?");
  EXPECT_EQ(squad.questions[0].answers, std::vector<std::string>{"fishing families"});
  EXPECT_EQ(squad.questions[0].more_docs.size(), 2u);  // the article's two other paragraphs
  const auto hotpot = read_hotpotqa(kData / "hotpotqa_sample.json");
  EXPECT_EQ(hotpot.questions.size(), 3u);
  EXPECT_EQ(hotpot.questions[0].gold_docs.size(), 4u);
  EXPECT_EQ(hotpot.documents.size(), 8u);  // 12 paragraphs, shared ones counted once
  EXPECT_EQ(hotpot.documents[hotpot.questions[0].gold_docs[0]],
            "Velmora pier\nThe oak pier of Velmora was built about one hundred and sixty years "
            "ago. It stands beside the stone quay.");
}

TEST(RulerInputs, SquadErrorsNameFileLineAndField) {
  const auto bad_json = write_temp("bad.json", "{\"data\": [\n{\"paragraphs\": [,]}]}");
  const std::string e1 = error_of([&] { read_squad(bad_json); });
  EXPECT_NE(e1.find("squad file " + bad_json.string() + ":2: not valid JSON"), std::string::npos)
      << e1;
  const auto missing = write_temp(
      "missing.json",
      R"({"data": [{"paragraphs": [{"context": "c", "qas": [{"is_impossible": false, "answers": []}]}]}]})");
  const std::string e2 = error_of([&] { read_squad(missing); });
  EXPECT_NE(e2.find("data[0].paragraphs[0].qas[0].question: missing"), std::string::npos) << e2;
  const auto wrong_type =
      write_temp("type.json", R"({"data": [{"paragraphs": [{"context": 3, "qas": []}]}]})");
  const std::string e3 = error_of([&] { read_squad(wrong_type); });
  EXPECT_NE(e3.find("data[0].paragraphs[0].context: expected a string, found number"),
            std::string::npos)
      << e3;
  const auto none = write_temp("none.json", R"({"data": []})");
  EXPECT_NE(error_of([&] { read_squad(none); }).find("no answerable question"), std::string::npos);
  EXPECT_NE(error_of([&] { read_squad(kData / "no-such.json"); }).find("does not exist"),
            std::string::npos);
}

TEST(RulerInputs, HotpotqaErrorsNameTheField) {
  const std::string e1 = error_of([] {
    parse_hotpotqa(R"([{"question": "q", "answer": "a", "context": [["t"]]}])", "h.json");
  });
  EXPECT_NE(e1.find("hotpotqa file h.json: [0].context[0]: expected [title, [sentences]]"),
            std::string::npos)
      << e1;
  const std::string e2 = error_of(
      [] { parse_hotpotqa(R"([{"question": "q", "context": [["t", ["s"]]]}])", "h.json"); });
  EXPECT_NE(e2.find("[0].answer: missing"), std::string::npos) << e2;
  EXPECT_NE(error_of([] { parse_hotpotqa(R"({"a": 1})", "h.json"); }).find("expected an array"),
            std::string::npos);
}

TEST(RulerInputs, EssayTooShortOrNotUtf8IsRefusedWithTheFileName) {
  const auto short_essay = write_temp("short.txt", "Only a few words here.");
  const std::string e1 = error_of([&] { load_essay(short_essay.string()); });
  EXPECT_NE(e1.find("essay " + short_essay.string() + ": 5 words"), std::string::npos) << e1;
  const auto binary = write_temp("bin.txt", "line one\nline two \xff\n");
  const std::string e2 = error_of([&] { load_essay(binary.string()); });
  EXPECT_NE(e2.find(binary.string() + ":2: not valid UTF-8"), std::string::npos) << e2;
  const Essay builtin = load_essay("builtin");
  EXPECT_EQ(builtin.words.size(), 1893u);
  EXPECT_EQ(builtin.repeats_for(4000), 3u);
  EXPECT_EQ(builtin.first_words(3), "On Keeping a");
  // Repetition continues with the first word, as RULER's (haystack * repeats)[:N].
  const std::string wrapped = builtin.first_words(1895);
  EXPECT_TRUE(wrapped.ends_with("all along. On Keeping"));
}

TEST(RulerInputs, SentenceSplitterKeepsAbbreviationsAndInitials) {
  const auto s = split_sentences(
      "It began. Mr. Smith met J. Doe at 5 p.m. today! Did it work? \"Yes.\" Then 3 more came.");
  const std::vector<std::string> expected = {"It began.", "Mr. Smith met J. Doe at 5 p.m. today!",
                                             "Did it work?", "\"Yes.\"", "Then 3 more came."};
  EXPECT_EQ(s, expected);
}

TEST(RulerInputs, TaskListsAllKnownOrderedAndChecked) {
  EXPECT_EQ(parse_ruler_task_list("all").size(), 13u);
  EXPECT_EQ(parse_ruler_task_list("qa_2, vt,niah_single_1"),
            (std::vector<std::string>{"niah_single_1", "vt", "qa_2"}));
  const std::string e = error_of([] { parse_ruler_task_list("vt,niah_single_9"); });
  EXPECT_NE(e.find("unknown RULER task 'niah_single_9' (known: niah_single_1"), std::string::npos)
      << e;
  EXPECT_NE(error_of([] { parse_ruler_task_list("vt,vt"); }).find("named twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_ruler_task_list("vt,,cwe"); }).find("empty name"),
            std::string::npos);
}

TEST(RulerTemplates, FormatIsOnePassLikePythonStrFormat) {
  EXPECT_EQ(format_template("{a}-{b} {{x}}", {{"a", "{b}"}, {"b", "2"}}), "{b}-2 {x}");
  EXPECT_THROW(format_template("{nope}", {}), InternalError);
  EXPECT_EQ(replace_all("are all are", "are", "is"), "is all is");
}

TEST(RulerTemplates, KvpressSplitOfEachFamily) {
  const auto niah = split_ruler_prompt(
      Family::niah,
      "A special magic number is hidden within the following text. Make sure to memorize it. I "
      "will quiz you about the number afterwards.\nhay\nWhat is the special magic number for "
      "k mentioned in the provided text? The special magic number for k mentioned in the "
      "provided text is");
  EXPECT_TRUE(niah.context.ends_with("\nhay\n"));
  EXPECT_EQ(niah.question,
            "What is the special magic number for k mentioned in the provided text? ");
  EXPECT_EQ(niah.answer_prefix, "The special magic number for k mentioned in the provided text is");
  // qa: the LAST copy of the instruction starts the question.
  const auto& qa = family_template(Family::qa);
  const std::string full =
      format_template(std::string(qa.template_text) + std::string(qa.answer_prefix),
                      {{"context", "Document 1:\nd"}, {"query", "Who?"}});
  const auto split = split_ruler_prompt(Family::qa, full);
  EXPECT_TRUE(split.context.ends_with("Document 1:\nd\n\n"));
  EXPECT_TRUE(split.question.starts_with("Answer the question based on the given documents."));
  EXPECT_TRUE(split.question.ends_with("Question: Who? "));
  EXPECT_EQ(split.answer_prefix, "Answer:");
  EXPECT_THROW(split_ruler_prompt(Family::freq_words_extraction, "no pattern"), InternalError);
}

TEST(RulerRandom, DrawsArePureFunctionsOfTheirCoordinates) {
  RulerRng a(42, 3, 4096, 7, RulerStream::content);
  RulerRng b(42, 3, 4096, 7, RulerStream::content);
  RulerRng other_index(42, 3, 4096, 8, RulerStream::content);
  RulerRng other_stream(42, 3, 4096, 7, RulerStream::layout);
  const auto x = a.next_u64();
  EXPECT_EQ(x, b.next_u64());
  EXPECT_NE(x, other_index.next_u64());
  EXPECT_NE(x, other_stream.next_u64());
  // sample_indices: distinct, in range, and prefix-stable.
  RulerRng s1(1, 0, 1024, 0, RulerStream::content);
  RulerRng s2(1, 0, 1024, 0, RulerStream::content);
  const auto ten = s1.sample_indices(100, 10);
  const auto fifty = s2.sample_indices(100, 50);
  EXPECT_TRUE(std::equal(ten.begin(), ten.end(), fifty.begin()));
  EXPECT_EQ(std::set<std::size_t>(fifty.begin(), fifty.end()).size(), 50u);
  for (const auto i : fifty) EXPECT_LT(i, 100u);
  const std::string uuid = a.uuid4();
  ASSERT_EQ(uuid.size(), 36u);
  EXPECT_EQ(uuid[14], '4');
  EXPECT_NE(std::string("89ab").find(uuid[19]), std::string::npos);
}

TEST(RulerWordLists, BundledWonderwordsListsAsRulerReadsThem) {
  const auto& w = bundled_word_lists();
  EXPECT_GT(w.adjectives.size(), 900u);
  EXPECT_GT(w.nouns.size(), 6000u);
  EXPECT_TRUE(std::is_sorted(w.cwe_pool.begin(), w.cwe_pool.end()));
  EXPECT_EQ(std::set<std::string>(w.cwe_pool.begin(), w.cwe_pool.end()).size(), w.cwe_pool.size());
  for (const auto& word : w.adjectives) EXPECT_FALSE(word.ends_with(' ')) << word;
  EXPECT_EQ(parse_word_list("a \nb\t\r\n\nc"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace kvaudit::benchmarks::ruler
