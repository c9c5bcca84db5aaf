// The canonical form of a manifest: a JSON document with sorted keys, sets sorted, defaults filled
// in and numbers in one shortest round-trip format, serialized compactly. Two manifests that mean
// the same study (key order, whitespace, comments, number spelling, set order, explicit defaults)
// have the same canonical text and so the same SHA-256; any change of meaning changes it.
// Not part of the canonical form (so not of the hash): study.description, study.output_dir and
// [sharding] (docs/MANIFEST.md says why). Keys that are absent by default (a RULER benchmark's
// generation_tokenizer) enter only when set, so adding such a key left older hashes unchanged.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

inline constexpr int kCanonicalSchema = 1;

nlohmann::json canonical_json(const Manifest& m);
std::string canonical_text(const Manifest& m);
std::string manifest_sha256(const Manifest& m);

// A method configuration by content: method id, variant and every parameter, with wrapped scorers
// expanded in place. Names do not enter it, so renaming a configuration keeps its cells' ids.
nlohmann::json canonical_method(const Manifest& m, const MethodConfig& cfg);
// A certification block as it enters the canonical form (and the lock's contracts).
nlohmann::json canonical_certification(const Certification& c);
// A grid's decode-time compression (its method by configuration name; the cell tuple inlines the
// configuration instead, suite/manifest/expansion.cpp).
nlohmann::json canonical_grid_decoding(const GridDecoding& d);
// The full-KV reference method.
nlohmann::json canonical_full_method();
// The identity of a model and a benchmark within cell ids (locations such as paths excluded).
nlohmann::json canonical_model_identity(const Model& model);
nlohmann::json canonical_benchmark_identity(const Benchmark& b);

// A short digest (16 hex digits) of a canonical method, stored in records as params_digest.
std::string params_digest(const nlohmann::json& canonical_method);

}  // namespace kvaudit::manifest
