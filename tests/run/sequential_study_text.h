// The manifest text of the sequential-calibration tests (scheduler, rank loop, MPI waves): one
// RULER benchmark (niah_single_1 and vt at 1024 tokens), a grid on one sdpa backend, and one
// certification block `c` over three compression candidates 0.25, 0.5, 0.75 of `block_method`.
// The model path is a placeholder: these tests never load a model (outcomes are synthetic).
#pragma once

#include <cstdint>
#include <string>

namespace kvaudit::run::testing {

struct SequentialStudy {
  std::uint64_t seed = 4242;
  std::int64_t instances = 400;                  // per task
  std::string methods = "\"snapkv\"";            // the grid's method list (TOML array body)
  std::string block_method = "snapkv";           // the block's method
  std::string protocols = "\"query-agnostic\"";  // the grid's protocols (TOML array body)
  std::string tau = "0.1", epsilon = "0.05", delta = "0.05";
  std::int64_t calibration = 200, test = 200;  // per task
  std::string block_extra = "sequential = true\n";
};

inline std::string sequential_study_text(const SequentialStudy& s) {
  std::string methods_tables;
  for (std::size_t at = 0; at < s.methods.size();) {
    const std::size_t open = s.methods.find('"', at);
    if (open == std::string::npos) break;
    const std::size_t close = s.methods.find('"', open + 1);
    methods_tables += "[methods." + s.methods.substr(open + 1, close - open - 1) + "]\n";
    at = close + 1;
  }
  return "[study]\nname = \"t\"\nseed = " + std::to_string(s.seed) +
         "\noutput_dir = \"out\"\n\n"
         "[[models]]\nname = \"m\"\npath = \"model.gguf\"\nformat = \"gguf\"\n"
         "chat_template = \"chatml\"\n\n"
         "[[benchmarks]]\nname = \"r\"\nkind = \"ruler\"\ntasks = [\"niah_single_1\", \"vt\"]\n"
         "length = 1024\ninstances = " +
         std::to_string(s.instances) + "\n\n" + methods_tables +
         "\n[[grids]]\nname = \"g\"\nbenchmarks = [\"r\"]\nmethods = [" + s.methods +
         "]\ncompression = [0.25, 0.5, 0.75]\nprotocols = [" + s.protocols +
         "]\nbackends = [\"sdpa\"]\n\n"
         "[[certification]]\nname = \"c\"\ngrid = \"g\"\nbenchmark = \"r\"\nmethod = \"" +
         s.block_method +
         "\"\nprotocol = \"query-agnostic\"\nbackend = \"sdpa\"\n"
         "candidates = [0.25, 0.5, 0.75]\ntau = " +
         s.tau + "\nepsilon = " + s.epsilon + "\ndelta = " + s.delta +
         "\ncalibration = " + std::to_string(s.calibration) + "\ntest = " + std::to_string(s.test) +
         "\n" + s.block_extra;
}

}  // namespace kvaudit::run::testing
