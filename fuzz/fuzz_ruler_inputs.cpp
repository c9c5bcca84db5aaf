// Fuzz target for the RULER generator's readers of untrusted input: the first byte picks the
// reader (SQuAD v2 JSON, HotpotQA JSON, essay text + sentence splitter, task list), the rest is
// its input. Only InputError (a clear, named rejection) may escape as an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "suite/benchmarks/ruler/essay.h"
#include "suite/benchmarks/ruler/qa_data.h"
#include "suite/benchmarks/ruler/ruler_generator.h"
#include "base/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace kvaudit::benchmarks::ruler;
  try {
    switch (data[0] % 4) {
      case 0:
        parse_squad(text, "fuzz.json");
        break;
      case 1:
        parse_hotpotqa(text, "fuzz.json");
        break;
      case 2: {
        split_sentences(text);
        const Essay essay = essay_from_text(text, "fuzz.txt");
        (void)essay.first_words(essay.words.size() + 3);
        break;
      }
      default:
        parse_ruler_task_list(text);
        break;
    }
  } catch (const kvaudit::InputError&) {
  }
  return 0;
}
