// CPython 3.11 difflib.SequenceMatcher(None, a, b).ratio() on code-point strings
// (Lib/difflib.py), reproduced step by step because the matching it finds is heuristic:
//  * b2j: for each element of b, its indices in b; with autojunk (the default) and len(b) >= 200,
//    elements occurring more than len(b) // 100 + 1 times in b are "popular" and removed from b2j
//    (they are not junk: isjunk is None, so the non-junk extension loops may still grow a match
//    over them);
//  * find_longest_match(alo, ahi, blo, bhi): the longest a[i:i+k] == b[j:j+k] built from b2j
//    (earliest i, then earliest j among the longest), then extended on both ends over equal
//    elements (junk extension loops never fire without junk);
//  * get_matching_blocks: a LIFO queue of (alo, ahi, blo, bhi) ranges split around each match;
//  * ratio = 2.0 * M / (len(a) + len(b)) with M the summed block sizes, 1.0 when both are empty.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvaudit::metrics {

// The summed sizes of get_matching_blocks().
std::size_t difflib_matching_characters(std::u32string_view a, std::u32string_view b);
// SequenceMatcher(None, a, b).ratio().
double difflib_ratio(std::u32string_view a, std::u32string_view b);

}  // namespace kvaudit::metrics
