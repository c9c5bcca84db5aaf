// MappedFile: POSIX open + fstat + mmap(PROT_READ, MAP_PRIVATE), with errors naming the path.
#include "runners/model/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

[[noreturn]] void fail_mapped(const std::filesystem::path& path, const std::string& what) {
  throw ModelInputError(path.string() + ": " + what);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      fail_mapped(path, "cannot open (" + ec.message() + ")");
    fail_mapped(path, "file does not exist");
  }
  if (std::filesystem::is_directory(status)) fail_mapped(path, "is a directory, expected a file");
  if (!std::filesystem::is_regular_file(status)) fail_mapped(path, "is not a regular file");

  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_mapped(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail_mapped(path, std::string("cannot stat (") + std::strerror(errno) + ")");
  if (st.st_size <= 0) fail_mapped(path, "file is empty");
  size_ = static_cast<std::size_t>(st.st_size);
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapped == MAP_FAILED) {
    size_ = 0;
    fail_mapped(path, std::string("cannot mmap (") + std::strerror(errno) + ")");
  }
  data_ = static_cast<const std::uint8_t*>(mapped);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kvaudit::model
