// Runs a fuzz target's LLVMFuzzerTestOneInput over files and directories given on the command line
// (the committed corpus), so every target is exercised without libFuzzer. Fails on a crash only:
// the target itself decides what counts as a bug (exceptions other than the documented input
// errors are bugs and escape as crashes).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg))
        if (e.is_regular_file()) n += run_file(e.path());
    } else {
      n += run_file(arg);
    }
  }
  if (n == 0) {
    std::fprintf(stderr, "replay: no inputs found in the given paths\n");
    return 1;
  }
  std::printf("replay: %d inputs ran without a crash\n", n);
  return 0;
}
