// The layout of a study bundle (`kvaudit bundle`, `kvaudit verify`; docs/ARTIFACTS.md): the files
// an evaluator needs to check that a paper's tables follow from the records and the records from
// the preregistered manifest, under fixed relative names (no absolute path survives bundling).
//
//   README.md         for the evaluator, generated from the study (what ran, how to verify, the
//                     time a re-run of N cells would take from the recorded times)
//   SHA256SUMS        sha256sum format: one line per other file, sorted by path
//   prereg.json       the preregistration lock, as written by `kvaudit plan`
//   manifest.toml     the manifest the lock locks (its bytes)
//   fingerprints.json the lock's model and data fingerprints (size + SHA-256 per input file)
//   provenance.json   each published shard's provenance attributes
//   shards/           every published shard and its .sha256 sidecar
//   report/           the latest report: report.md, tables/*.csv|*.tex, summary.h5, figures/
#pragma once

namespace kvaudit::artifacts {

inline constexpr const char* kReadme = "README.md";
inline constexpr const char* kSums = "SHA256SUMS";
inline constexpr const char* kLock = "prereg.json";
inline constexpr const char* kManifest = "manifest.toml";
inline constexpr const char* kFingerprints = "fingerprints.json";
inline constexpr const char* kProvenance = "provenance.json";
inline constexpr const char* kShards = "shards";
inline constexpr const char* kReport = "report";

}  // namespace kvaudit::artifacts
