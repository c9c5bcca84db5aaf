// Every file in tests/manifest/malformed/ must be rejected with exactly the lines of its .expected
// file (file:line:column: field: what is wrong), and parsing must not touch the file system.
#include <gtest/gtest.h>

#include <algorithm>

#include "suite/manifest/diagnostics.h"
#include "suite/manifest/manifest_parser.h"
#include "test_support.h"

namespace kvaudit::manifest {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<std::filesystem::path> malformed_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e :
       std::filesystem::directory_iterator(test::source_path("tests/manifest/malformed")))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(MalformedManifests, AtLeastFifteenCasesExist) { EXPECT_GE(malformed_files().size(), 15u); }

TEST(MalformedManifests, EachIsRejectedWithItsExactMessages) {
  for (const auto& file : malformed_files()) {
    SCOPED_TRACE(file.filename().string());
    const auto expected_file = std::filesystem::path(file).replace_extension(".expected");
    ASSERT_TRUE(std::filesystem::exists(expected_file)) << expected_file << " is missing";
    const auto expected = split_lines(test::read_file(expected_file));
    ASSERT_FALSE(expected.empty());
    try {
      parse_manifest(test::read_file(file), file.filename());
      ADD_FAILURE() << "accepted a malformed manifest";
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.lines(), expected);
    }
  }
}

TEST(MalformedManifests, MissingFileNamesIt) {
  try {
    load_manifest("/nonexistent/dir/study.toml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/dir/study.toml: cannot read the manifest (no such file)");
  }
}

}  // namespace
}  // namespace kvaudit::manifest
