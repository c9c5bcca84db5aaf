// CPython 3.11 str behaviour on code points; see python_text.h.
#include "suite/benchmarks/metrics/python_text.h"

#include <utf8proc.h>

namespace kvaudit::metrics {
namespace {

constexpr char32_t kCapitalSigma = 0x03A3;
constexpr char32_t kSmallSigma = 0x03C3;
constexpr char32_t kFinalSigma = 0x03C2;
constexpr char32_t kDottedCapitalI = 0x0130;
constexpr char32_t kCombiningDotAbove = 0x0307;
constexpr char32_t kMaxCodePoint = 0x10FFFF;

const utf8proc_property_t* property(char32_t c) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
}

utf8proc_category_t category(char32_t c) {
  return static_cast<utf8proc_category_t>(property(c)->category);
}

bool in_ranges(char32_t c, std::initializer_list<std::pair<char32_t, char32_t>> ranges) {
  for (const auto& [lo, hi] : ranges) {
    if (c >= lo && c <= hi) return true;
  }
  return false;
}

// CPython's handle_capital_sigma (Objects/unicodeobject.c): `i` indexes the U+03A3 in `text`.
char32_t lower_capital_sigma(std::u32string_view text, std::size_t i) {
  std::size_t j = i;
  bool found_before = false;
  char32_t c = 0;
  while (j > 0) {
    --j;
    c = text[j];
    if (!unicode_case_ignorable(c)) {
      found_before = true;
      break;
    }
  }
  bool final_sigma = found_before && cased_for_final_sigma(c);
  if (final_sigma && i + 1 < text.size()) {
    std::size_t k = i + 1;
    for (; k < text.size(); ++k) {
      c = text[k];
      if (!unicode_case_ignorable(c)) break;
    }
    final_sigma = k == text.size() || !cased_for_final_sigma(c);
  }
  return final_sigma ? kFinalSigma : kSmallSigma;
}

}  // namespace

bool python_isspace(char32_t c) {
  if (c > kMaxCodePoint) return false;
  const auto* p = property(c);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

bool python_re_word(char32_t c) {
  if (c == U'_') return true;
  if (c > kMaxCodePoint) return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool python_re_decimal(char32_t c) {
  return c <= kMaxCodePoint && category(c) == UTF8PROC_CATEGORY_ND;
}

bool cased_for_final_sigma(char32_t c) {
  if (c > kMaxCodePoint) return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      // Other_Lowercase / Other_Uppercase (PropList.txt) outside Case_Ignorable.
      return in_ranges(c, {{0x00AA, 0x00AA},
                           {0x00BA, 0x00BA},
                           {0x2160, 0x217F},
                           {0x24B6, 0x24E9},
                           {0x1F130, 0x1F149},
                           {0x1F150, 0x1F169},
                           {0x1F170, 0x1F189}});
  }
}

bool unicode_case_ignorable(char32_t c) {
  if (c > kMaxCodePoint) return false;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      // Word_Break MidLetter, MidNumLet and Single_Quote (DerivedCoreProperties.txt).
      return in_ranges(c, {{0x0027, 0x0027},
                           {0x002E, 0x002E},
                           {0x003A, 0x003A},
                           {0x00B7, 0x00B7},
                           {0x0387, 0x0387},
                           {0x055F, 0x055F},
                           {0x05F4, 0x05F4},
                           {0x2018, 0x2019},
                           {0x2024, 0x2024},
                           {0x2027, 0x2027},
                           {0xFE13, 0xFE13},
                           {0xFE52, 0xFE52},
                           {0xFE55, 0xFE55},
                           {0xFF07, 0xFF07},
                           {0xFF0E, 0xFF0E},
                           {0xFF1A, 0xFF1A}});
  }
}

std::u32string python_lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == kCapitalSigma) {
      out.push_back(lower_capital_sigma(text, i));
    } else if (c == kDottedCapitalI) {
      out.push_back(U'i');
      out.push_back(kCombiningDotAbove);
    } else if (c < 0x80) {
      out.push_back(c >= U'A' && c <= U'Z' ? c + 32 : c);
    } else if (c > kMaxCodePoint) {
      out.push_back(c);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

std::u32string_view python_strip(std::u32string_view text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && python_isspace(text[begin])) ++begin;
  while (end > begin && python_isspace(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

std::u32string_view python_lstrip_char(std::u32string_view text, char32_t c) {
  std::size_t begin = 0;
  while (begin < text.size() && text[begin] == c) ++begin;
  return text.substr(begin);
}

std::vector<std::u32string> python_split_whitespace(std::u32string_view text) {
  std::vector<std::u32string> pieces;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && python_isspace(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !python_isspace(text[i])) ++i;
    if (i > start) pieces.emplace_back(text.substr(start, i - start));
  }
  return pieces;
}

std::vector<std::u32string> python_split_char(std::u32string_view text, char32_t sep) {
  std::vector<std::u32string> pieces;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == sep) {
      pieces.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  pieces.emplace_back(text.substr(start));
  return pieces;
}

std::u32string python_collapse_whitespace(std::u32string_view text) {
  std::u32string out;
  for (const auto& piece : python_split_whitespace(text)) {
    if (!out.empty()) out.push_back(U' ');
    out += piece;
  }
  return out;
}

}  // namespace kvaudit::metrics
