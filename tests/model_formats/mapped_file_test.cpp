// MappedFile: maps a file's exact bytes; missing, directory and empty files give errors naming the
// path and the reason.
#include "runners/model/formats/mapped_file.h"

#include <gtest/gtest.h>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

TEST(MappedFile, MapsTheFileBytes) {
  const auto path = write_file(scratch_dir() / "data.bin", {'a', 0, 'b', 0xff});
  const MappedFile file(path);
  ASSERT_EQ(file.size(), 4u);
  EXPECT_EQ(file.bytes()[0], 'a');
  EXPECT_EQ(file.bytes()[1], 0);
  EXPECT_EQ(file.bytes()[3], 0xff);
  EXPECT_EQ(file.path(), path);
}

TEST(MappedFile, MoveKeepsTheMapping) {
  const auto path = write_text(scratch_dir() / "data.bin", "xyz");
  MappedFile first(path);
  MappedFile second(std::move(first));
  EXPECT_EQ(second.size(), 3u);
  EXPECT_EQ(second.bytes()[2], 'z');
  EXPECT_EQ(first.size(), 0u);  // NOLINT(bugprone-use-after-move): documented moved-from state
}

TEST(MappedFile, MissingFileIsNamed) {
  const auto path = scratch_dir() / "absent.gguf";
  expect_model_error([&] { MappedFile file(path); }, {path.string(), "does not exist"});
}

TEST(MappedFile, DirectoryIsRejected) {
  const auto dir = scratch_dir();
  expect_model_error([&] { MappedFile file(dir); }, {dir.string(), "is a directory"});
}

TEST(MappedFile, EmptyFileIsRejected) {
  const auto path = write_text(scratch_dir() / "empty.safetensors", "");
  expect_model_error([&] { MappedFile file(path); }, {path.string(), "file is empty"});
}

}  // namespace
}  // namespace kvaudit::model::test
