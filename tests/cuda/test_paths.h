// Where the GPU tests find their models and goldens: an environment variable when set, else the
// path compiled in (the source tree that built the binary). tests/device/check.sh runs the binaries
// from a copied tree on a GPU machine, where the compiled-in paths do not exist, and sets the
// variables; every test must read its paths through these functions, never the macros directly
// (the lint.gpu_test_paths check enforces it).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace kvaudit::cuda::test {

inline std::filesystem::path path_from_env(const char* variable, const char* fallback) {
  if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') return value;
  return fallback;
}

#ifdef KVAUDIT_TINY_MODELS_DIR
inline std::filesystem::path tiny_models_dir() {
  return path_from_env("KVAUDIT_TINY_MODELS_DIR", KVAUDIT_TINY_MODELS_DIR);
}
#endif
#ifdef KVAUDIT_SMOLLM2_GOLDEN_DIR
inline std::filesystem::path smollm2_golden_dir() {
  return path_from_env("KVAUDIT_SMOLLM2_GOLDEN_DIR", KVAUDIT_SMOLLM2_GOLDEN_DIR);
}
#endif
#ifdef KVAUDIT_SMOLLM2_GGUF_DEFAULT
inline std::filesystem::path smollm2_gguf() {
  return path_from_env("KVAUDIT_SMOLLM2_GGUF", KVAUDIT_SMOLLM2_GGUF_DEFAULT);
}
#endif

}  // namespace kvaudit::cuda::test
