// Reading a user-given input file of the RULER generator (essay, SQuAD, HotpotQA) whole, with
// errors that name the file and what is wrong, and the 1-based line of a byte offset for messages.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvaudit::benchmarks::ruler {

// Throws InputError "<what> file <path>: ..." when the file is missing, unreadable, larger than
// 2 GiB or not valid UTF-8 (naming the line of the first bad byte).
std::string read_text_file(const std::filesystem::path& path, std::string_view what);

// 1-based line number of byte `offset` in `text`.
std::size_t line_of_offset(std::string_view text, std::size_t offset);

}  // namespace kvaudit::benchmarks::ruler
