// The number matching shared by LongBench count_score and retrieval_score /
// retrieval_zh_score (THUDM/LongBench LongBench/metrics.py):
//   numbers = re.findall(r"\d+", prediction)
//   right_num = number of them with str(number) == str(target)
//   score = 0.0 if len(numbers) == 0 else right_num / len(numbers)
// \d is Python's Unicode \d (category Nd: "١٢" and "３" are numbers), and the comparison is on
// the digit strings: "007" != "7", "١٢" != "12".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::metrics {

// re.findall(r"\d+", text).
std::vector<std::u32string> python_decimal_runs(std::u32string_view text);
// The fraction above.
double fraction_of_numbers_equal(std::u32string_view prediction, std::u32string_view target);

}  // namespace kvaudit::metrics
