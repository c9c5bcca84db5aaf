// kvaudit inspect --diff STUDY_A STUDY_B: do two runs of the "same" cells agree below the score?
//
// Both studies' published shards are read (verified as reduce reads them). Cells are matched by
// what they are, not by their id: (model, benchmark, task, instance, attention backend, method
// config name, budget kind and value, protocol) — so a study whose method parameters changed (a
// new cell id) still pairs its cells with the other study's, and the report says how many matched
// cells have different ids. For every matched pair whose two records are `ok` it compares the
// prompt digest, the kept digest and the output (records schema 4; a record without digests counts
// as "unknown" for them), and prints: the counts identical / different / unknown for each, the
// differing cells per method, and the first cells (up to 10) where the studies part with what
// differs. Returns 0 (a comparison, not a verdict: the counts are the result).
#pragma once

#include <filesystem>
#include <ostream>

namespace kvaudit::cli {

int inspect_diff(const std::filesystem::path& study_a, const std::filesystem::path& study_b,
                 std::ostream& out);

}  // namespace kvaudit::cli
