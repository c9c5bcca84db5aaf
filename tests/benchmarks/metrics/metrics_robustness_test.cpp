// Robustness: random UTF-8 (ASCII, punctuation, spaces of every kind, accents, CJK, emoji, final
// sigma material) and random bytes (mostly invalid UTF-8) through every metric never crash, never
// throw anything but kvaudit::InputError (only where Python raises: an empty RULER reference
// list, a retrieval ground truth without "Paragraph <digits>"), and always give a finite score in
// [0, 1]. Invalid UTF-8 is decoded with U+FFFD replacement (python_text.h), so a byte string and
// its replacement-decoded re-encoding score the same.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "suite/benchmarks/metrics/metric.h"
#include "suite/benchmarks/metrics/python_text.h"
#include "suite/benchmarks/metrics/score_request.h"
#include "base/errors.h"

namespace kvaudit::metrics {
namespace {

const std::vector<std::string> kPieces = {"a",
                                          "an",
                                          "the",
                                          "The",
                                          "Paragraph ",
                                          "Paragraph 1",
                                          "12",
                                          "7",
                                          " ",
                                          "  ",
                                          ".",
                                          "..",
                                          "\n",
                                          "\t",
                                          "#",
                                          "//",
                                          "`",
                                          "_",
                                          "-",
                                          ",",
                                          "\xC2\xA0",
                                          "\xE3\x80\x80",
                                          "\xE2\x80\xA8",
                                          "\xC2\x85",
                                          "\x1C",
                                          "\xE2\x80\x8B",
                                          "\xC3\xA9",
                                          "e\xCC\x81",
                                          "\xCE\xA3",
                                          "\xCE\x91",
                                          "\xC4\xB0",
                                          "\xE6\x9D\xB1\xE4\xBA\xAC",
                                          "\xF0\x9F\x98\x80",
                                          "\xD9\xA1\xD9\xA2",
                                          "\xEF\xBC\x93",
                                          "\xE6\xAE\xB5\xE8\x90\xBD",
                                          "x",
                                          "word",
                                          "Number",
                                          "Other entity",
                                          "\x00",
                                          "\x7F"};

class RandomText {
 public:
  explicit RandomText(unsigned seed) : engine_(seed) {}
  std::string valid(int max_pieces) {
    std::string text;
    const int count = uniform(0, max_pieces);
    for (int k = 0; k < count; ++k)
      text += kPieces[static_cast<std::size_t>(uniform(0, static_cast<int>(kPieces.size()) - 1))];
    return text;
  }
  std::string bytes(int max_length) {
    std::string text;
    const int length = uniform(0, max_length);
    for (int k = 0; k < length; ++k) text.push_back(static_cast<char>(uniform(0, 255)));
    return text;
  }
  std::string any(int size) {
    switch (uniform(0, 2)) {
      case 0:
        return valid(size);
      case 1:
        return bytes(size * 2);
      default:
        return valid(size / 2) + bytes(4) + valid(size / 2);
    }
  }
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }

 private:
  std::mt19937 engine_;
};

TEST(MetricsRobustness, RandomAndInvalidUtf8NeverCrash) {
  RandomText random(20260805u);
  const Metric metrics[] = {
      Metric::string_match_all,   Metric::string_match_part,    Metric::qa_f1_score,
      Metric::rouge_score,        Metric::classification_score, Metric::retrieval_score,
      Metric::retrieval_zh_score, Metric::count_score,          Metric::code_sim_score};
  int scored = 0;
  int input_errors = 0;
  for (const Metric metric : metrics) {
    for (int iteration = 0; iteration < 1500; ++iteration) {
      const std::string prediction = random.any(24);
      std::vector<std::string> answers;
      const int answer_count = random.uniform(0, 3);
      for (int k = 0; k < answer_count; ++k) answers.push_back(random.any(12));
      std::vector<std::string> classes;
      for (int k = random.uniform(0, 4); k > 0; --k) classes.push_back(random.any(4));
      try {
        const double score = score_request(metric, prediction, answers, classes);
        ASSERT_TRUE(std::isfinite(score)) << metric_name(metric);
        ASSERT_GE(score, 0.0) << metric_name(metric);
        ASSERT_LE(score, 1.0) << metric_name(metric);
        // Replacement decoding: the re-encoded decoded text scores identically.
        std::vector<std::string> reencoded_answers;
        for (const auto& answer : answers) {
          reencoded_answers.push_back(encode_utf8(decode_utf8_replace(answer)));
        }
        std::vector<std::string> reencoded_classes;
        for (const auto& c : classes)
          reencoded_classes.push_back(encode_utf8(decode_utf8_replace(c)));
        ASSERT_EQ(score_request(metric, encode_utf8(decode_utf8_replace(prediction)),
                                reencoded_answers, reencoded_classes),
                  score)
            << metric_name(metric);
        ++scored;
      } catch (const InputError&) {
        ++input_errors;  // only where Python raises too (see the file comment)
        const bool allowed =
            ((metric == Metric::string_match_all || metric == Metric::string_match_part) &&
             answers.empty()) ||
            metric == Metric::retrieval_score || metric == Metric::retrieval_zh_score;
        ASSERT_TRUE(allowed) << metric_name(metric) << " threw InputError unexpectedly";
      }
    }
  }
  std::printf("robustness: %d requests scored, %d InputErrors where Python raises\n", scored,
              input_errors);
  EXPECT_GT(scored, 9000);
}

TEST(MetricsRobustness, LongInputsStayBounded) {
  // A 20k-word prediction without '.' against a 1k-word reference: the ROUGE path is refused
  // before any table is built (RecursionError upstream -> 0.0); qa_f1 and code_sim finish.
  std::string words;
  for (int k = 0; k < 20000; ++k) words += "w" + std::to_string(k % 1500) + " ";
  std::string reference;
  for (int k = 0; k < 1000; ++k) reference += "w" + std::to_string(k) + " ";
  EXPECT_EQ(score_request(Metric::rouge_score, words, std::vector<std::string>{reference}), 0.0);
  EXPECT_GT(score_request(Metric::qa_f1_score, words, std::vector<std::string>{reference}), 0.0);
  EXPECT_GE(score_request(Metric::code_sim_score, words, std::vector<std::string>{reference}), 0.0);
}

}  // namespace
}  // namespace kvaudit::metrics
