// Text compiled into kvaudit for the RULER generator (data/ruler/, see data/ruler/README.md):
//  * the default essay haystack: original prose written for kvaudit and dedicated to the public
//    domain (CC0 1.0), data/ruler/essay.txt;
//  * the wonderwords 3.0.1 word lists (MIT licence, data/ruler/wonderwords/LICENSE) that RULER
//    draws needle keys (adjective-noun) and cwe's vocabulary from.
// The bytes are embedded at build time by suite/benchmarks/ruler/CMakeLists.txt (embed_text.cmake),
// so the binary needs no data directory at run time.
#pragma once

#include <string_view>

namespace kvaudit::benchmarks::ruler {

std::string_view bundled_essay();
std::string_view bundled_adjective_list();
std::string_view bundled_noun_list();
std::string_view bundled_verb_list();

}  // namespace kvaudit::benchmarks::ruler
