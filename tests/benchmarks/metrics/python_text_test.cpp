// python_text (CPython str behaviour on code points) against CPython's own tables
// (tests/golden/metrics/unicode_python.json): every code point for isspace, re \w, re \d and
// lower(), the three Final_Sigma context probes for every code point, and bytes.decode("utf-8",
// "replace") on ill-formed sequences; plus hand-written cases.
#include "suite/benchmarks/metrics/python_text.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdio>
#include <string>

#include "tests/benchmarks/metrics/golden_fixture.h"

namespace kvaudit::metrics {
namespace {

using testing::in_ranges;
using testing::load_metrics_golden;
using testing::ranges_of;

constexpr char32_t kLastCodePoint = 0x10FFFF;

bool is_surrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

std::string hex(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(c));
  return buffer;
}

// Code points CPython 3.11 (Unicode 14.0) leaves unassigned but utf8proc (Unicode 15.0)
// assigns: their properties legitimately differ (the documented deviation of python_text.h).
class PythonUnicodeTables : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tables_ = new nlohmann::json(load_metrics_golden("unicode_python.json"));
  }
  static void TearDownTestSuite() {
    delete tables_;
    tables_ = nullptr;
  }
  static bool newer_than_python(char32_t c, const testing::CodePointRanges& unassigned) {
    return in_ranges(unassigned, c) &&
           utf8proc_category(static_cast<utf8proc_int32_t>(c)) != UTF8PROC_CATEGORY_CN;
  }
  // Compares `predicate` with the fixture's ranges `name` on every comparable code point.
  static void expect_class_matches(const char* name, bool (*predicate)(char32_t)) {
    const auto expected = ranges_of(tables_->at(name));
    const auto unassigned = ranges_of(tables_->at("unassigned"));
    int mismatches = 0;
    int skipped = 0;
    for (char32_t c = 0; c <= kLastCodePoint; ++c) {
      if (is_surrogate(c)) continue;
      if (newer_than_python(c, unassigned)) {
        ++skipped;
        continue;
      }
      if (predicate(c) != in_ranges(expected, c)) {
        if (++mismatches <= 10) {
          ADD_FAILURE() << name << ": " << hex(c) << " python=" << in_ranges(expected, c);
        }
      }
    }
    std::printf(
        "%s: %d mismatches over all code points (%d assigned only after Unicode %s "
        "skipped)\n",
        name, mismatches, skipped, tables_->at("unicodedata_version").get<std::string>().c_str());
    EXPECT_EQ(mismatches, 0);
  }
  static nlohmann::json* tables_;
};
nlohmann::json* PythonUnicodeTables::tables_ = nullptr;

TEST_F(PythonUnicodeTables, IsspaceOnEveryCodePoint) {
  expect_class_matches("isspace", python_isspace);
}

TEST_F(PythonUnicodeTables, RegexWordOnEveryCodePoint) {
  expect_class_matches("re_word", python_re_word);
}

TEST_F(PythonUnicodeTables, RegexDecimalOnEveryCodePoint) {
  expect_class_matches("re_decimal", python_re_decimal);
}

TEST_F(PythonUnicodeTables, LowerOnEveryCodePoint) {
  const auto unassigned = ranges_of(tables_->at("unassigned"));
  std::vector<std::u32string> lower(kLastCodePoint + 1);
  for (const auto& entry : tables_->at("lower_map")) {
    std::u32string mapped;
    for (std::size_t k = 1; k < entry.size(); ++k) mapped.push_back(entry[k].get<char32_t>());
    lower[entry[0].get<char32_t>()] = mapped;
  }
  int mismatches = 0;
  int changed = 0;
  for (char32_t c = 0; c <= kLastCodePoint; ++c) {
    if (is_surrogate(c) || newer_than_python(c, unassigned)) continue;
    const std::u32string want = lower[c].empty() ? std::u32string(1, c) : lower[c];
    if (!lower[c].empty()) ++changed;
    if (python_lower(std::u32string(1, c)) != want && ++mismatches <= 10) {
      ADD_FAILURE() << "lower(" << hex(c) << ") differs from Python";
    }
  }
  std::printf("lower: %d code points that Python changes, %d mismatches\n", changed, mismatches);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(changed, 1000);
}

TEST_F(PythonUnicodeTables, FinalSigmaContextOnEveryCodePoint) {
  const auto unassigned = ranges_of(tables_->at("unassigned"));
  const auto& probes = tables_->at("sigma_probes");
  const auto before_any = ranges_of(probes.at("cased_or_ignorable_before"));
  const auto before_alone = ranges_of(probes.at("cased_before_alone"));
  const auto after = ranges_of(probes.at("ignorable_or_uncased_after"));
  int mismatches = 0;
  for (char32_t c = 0; c <= kLastCodePoint; ++c) {
    if (is_surrogate(c) || newer_than_python(c, unassigned)) continue;
    const std::u32string probe1 = python_lower(std::u32string{U'A', c, U'\u03A3'});
    const std::u32string probe2 = python_lower(std::u32string{c, U'\u03A3'});
    const std::u32string probe3 = python_lower(std::u32string{U'A', U'\u03A3', c});
    const bool got1 = probe1.back() == U'\u03C2';
    const bool got2 = probe2.back() == U'\u03C2';
    const bool got3 = probe3[1] == U'\u03C2';
    if ((got1 != in_ranges(before_any, c) || got2 != in_ranges(before_alone, c) ||
         got3 != in_ranges(after, c)) &&
        ++mismatches <= 10) {
      ADD_FAILURE() << "final sigma context around " << hex(c) << " differs from Python";
    }
  }
  std::printf("final sigma probes: %d mismatches\n", mismatches);
  EXPECT_EQ(mismatches, 0);
}

TEST_F(PythonUnicodeTables, DecodeReplaceMatchesPython) {
  int cases = 0;
  for (const auto& entry : tables_->at("utf8_replace")) {
    const std::string hex_bytes = entry.at("hex").get<std::string>();
    std::string bytes;
    for (std::size_t k = 0; k + 1 < hex_bytes.size(); k += 2) {
      bytes.push_back(static_cast<char>(std::stoi(hex_bytes.substr(k, 2), nullptr, 16)));
    }
    std::u32string want;
    for (const auto& cp : entry.at("codepoints")) want.push_back(cp.get<char32_t>());
    EXPECT_EQ(decode_utf8_replace(bytes), want) << "bytes " << hex_bytes;
    ++cases;
  }
  EXPECT_GE(cases, 30);
}

TEST(PythonText, SplitUsesPythonWhitespace) {
  // U+00A0, U+3000, U+2028, U+0085 and U+001C split; U+200B and U+FEFF do not.
  const auto pieces =
      python_split_whitespace(U"a\u00A0b\u3000c\u2028d\u0085e\u001Cf\u200Bg\uFEFFh");
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(pieces[5], U"f\u200Bg\uFEFFh");
  EXPECT_TRUE(python_split_whitespace(U" \t\n ").empty());
  EXPECT_EQ(python_collapse_whitespace(U"  x \u2003 y\n"), U"x y");
  EXPECT_EQ(python_strip(U"\u00A0 x y\u3000"), U"x y");
}

TEST(PythonText, SplitCharKeepsEmptyPieces) {
  const auto pieces = python_split_char(U".a..b.", U'.');
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(pieces[0], U"");
  EXPECT_EQ(pieces[1], U"a");
  EXPECT_EQ(pieces[4], U"");
  EXPECT_EQ(python_lstrip_char(U"\n\nx\n", U'\n'), U"x\n");
}

TEST(PythonText, LowerSpecialCases) {
  EXPECT_EQ(python_lower(U"\u0130stanbul"), U"i\u0307stanbul");  // full mapping: two code points
  EXPECT_EQ(python_lower(U"\u039F\u0394\u039F\u03A3"), U"\u03BF\u03B4\u03BF\u03C2");  // ΟΔΟΣ
  EXPECT_EQ(python_lower(U"\u03A3"), U"\u03C3");                          // alone: not final
  EXPECT_EQ(python_lower(U"\u0391\u03A3\u0391"), U"\u03B1\u03C3\u03B1");  // medial
  EXPECT_EQ(python_lower(U"\u0391\u03A3'"), U"\u03B1\u03C2'");            // case-ignorable after
  EXPECT_EQ(python_lower(U"\u0391'\u03A3"), U"\u03B1'\u03C2");            // case-ignorable before
  EXPECT_EQ(python_lower(U"STRASSE \u1E9E \u212A \u01C5"), U"strasse \u00DF k \u01C6");
}

TEST(PythonText, DecodeHandWritten) {
  EXPECT_EQ(decode_utf8_replace("caf\xC3\xA9"), U"caf\u00E9");
  EXPECT_EQ(decode_utf8_replace("\xED\xA0\x80"), U"\uFFFD\uFFFD\uFFFD");  // encoded surrogate
  EXPECT_EQ(decode_utf8_replace("\xE2\x82"), U"\uFFFD");                  // truncated: one
  EXPECT_EQ(decode_utf8_replace("\xF0\x9F\x98\x80"), U"\U0001F600");
  EXPECT_EQ(decode_utf8_replace(std::string("a\0b", 3)), std::u32string(U"a\0b", 3));
  const std::u32string text = U"x\u00E9\u6771\U0001F600";
  EXPECT_EQ(decode_utf8_replace(encode_utf8(text)), text);
}

}  // namespace
}  // namespace kvaudit::metrics
