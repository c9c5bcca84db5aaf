// PCRE2-backed Isolated splitting for HF pre-tokenizer patterns.
#include "runners/model/tokenizer/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/utf8.h"

namespace kvaudit::model {
namespace {

constexpr std::uint32_t kMatchLimit = 100'000'000;   // backtracking steps per match attempt
constexpr std::uint32_t kHeapLimitKib = 256 * 1024;  // 256 MiB

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

}  // namespace

struct PretokenizerRegex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  bool jit = false;

  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

// Unicode White_Space (PropList.txt), as PCRE2 class members.
constexpr std::string_view kWhiteSpaceMembers =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string with_unicode_white_space_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  bool class_start = false;  // just after '[' or '[^' (a ']' here is literal)
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 'Q') {  // \Q...\E quotes everything up to \E
        const std::size_t end = pattern.find("\\E", i + 2);
        const std::size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop - 1;
        class_start = false;
        continue;
      }
      if (next == 's') {
        if (in_class) {
          out += kWhiteSpaceMembers;
        } else {
          out.append("[").append(kWhiteSpaceMembers).append("]");
        }
      } else if (next == 'S' && !in_class) {
        out.append("[^").append(kWhiteSpaceMembers).append("]");
      } else {
        out += c;
        out += next;
      }
      ++i;
      class_start = false;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out += '^';
        ++i;
      }
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      // POSIX class [:name:] inside a bracket expression.
      const std::size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 1;
        class_start = false;
        continue;
      }
    }
    if (in_class && c == ']' && !class_start) in_class = false;
    class_start = false;
    out += c;
  }
  return out;
}

PretokenizerRegex::PretokenizerRegex(std::string_view pattern, bool literal, std::string origin)
    : pattern_(pattern), origin_(std::move(origin)) {
  auto compiled = std::make_shared<Compiled>();
  const std::string source =
      literal ? std::string(pattern) : with_unicode_white_space_classes(pattern);
  // PCRE2_LITERAL admits no UCP (nor most other options); a literal needs no classes anyway.
  const std::uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                 options, &error, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    throw ModelInputError(origin_ + ": pattern does not compile (PCRE2: " + pcre2_message(error) +
                          " at offset " + std::to_string(error_offset) + "): '" + pattern_ + "'");
  }
  compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
  compiled->context = pcre2_match_context_create(nullptr);
  if (compiled->context == nullptr) throw std::bad_alloc();
  pcre2_set_match_limit(compiled->context, kMatchLimit);
  pcre2_set_heap_limit(compiled->context, kHeapLimitKib);
  compiled_ = std::move(compiled);
}

bool PretokenizerRegex::uses_jit() const { return compiled_->jit; }

void PretokenizerRegex::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  if (!data) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t previous = 0;  // end of the last match
  std::size_t from = 0;      // where the next search starts
  bool use_jit = compiled_->jit;
  while (from <= text.size()) {
    const std::uint32_t options = PCRE2_NO_UTF_CHECK | (use_jit ? 0u : PCRE2_NO_JIT);
    const int rc = pcre2_match(compiled_->code, subject, text.size(), from, options, data.get(),
                               compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && use_jit) {
      use_jit = false;  // retry this search with the interpreter, which uses the heap
      continue;
    }
    if (rc < 0) {
      throw ModelInputError(origin_ + ": matching the pattern failed on the input (PCRE2: " +
                            pcre2_message(rc) + ")");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t start = ovector[0];
    const std::size_t end = ovector[1];
    if (start > previous) pieces.push_back(text.substr(previous, start - previous));
    if (end > start) {
      pieces.push_back(text.substr(start, end - start));
      previous = end;
      from = end;
    } else {
      previous = std::max(previous, end);
      if (end >= text.size()) break;
      char32_t ignored = 0;
      from = end + decode_code_point(text, end, ignored);
    }
  }
  if (previous < text.size()) pieces.push_back(text.substr(previous));
}

}  // namespace kvaudit::model

// The code-unit width pcre2.h was included with, undefined so that it stays private to this file.
#undef PCRE2_CODE_UNIT_WIDTH
