// The catalogue of eviction methods a manifest may name: each method's id, variants, parameters
// and budget axis — the one description of every parameter (name, type, range, per-variant
// defaults, documentation, whether it names a scorer), each bound to its member of the method's
// typed struct (method_params.h), whose initializer is the default. The manifest validator checks
// method configs against it (with file positions), resolve_method (method_resolution.h) turns a
// config into typed values; the methods (one file each beside this one) implement them.
// Defaults follow kvpress 0.5.5's presses and the original papers' code (docs/design/kvpress.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "methods/method_params.h"

namespace kvaudit::methods {

// What a method's budget is expressed in.
enum class BudgetAxis {
  none,       // full KV: keeps everything
  ratio,      // a compression (fraction removed) or retention (fraction kept) ratio
  threshold,  // a request-adaptive threshold T; realised retention is measured, not set
};

enum class ParamType {
  integer,
  real,
  boolean,
  choice,      // one of `choices`
  method_ref,  // the name of another method config in the manifest (wrappers: adakv, chunkkv, ...)
  // A file the method reads (a learned artefact, head scores): written as a path relative to the
  // manifest's directory (or absolute). The manifest keeps it as written (so the study hash does
  // not depend on where the study lives); plan and run check that the file is readable and run
  // ParamSpec::check_file on it (file:line:col on failure); the method configs handed to the
  // factory carry it resolved to an absolute path (suite/manifest/method_configs.h); its SHA-256
  // enters the lock's input fingerprints as input "methods.<config>.<param>", so a changed file
  // refuses `kvaudit run` instead of silently reusing records.
  path,
  // Lists (kvpress's list-valued press fields): a TOML array in the manifest, kept in ParamValue
  // as one canonical string (methods/param_lists.h) — numbers as shortest round-trip decimals,
  // names as written, joined by ','. The canonical JSON of the manifest writes them as arrays
  // (names inlined as the referenced configs, like method_ref). Arrays are non-empty; `min`,
  // `max`, `max_exclusive` bound every element of a real_list.
  real_list,        // numbers (per_layer_compression's compression_ratios)
  method_ref_list,  // names of other method configs, each a scorer (composed's presses)
};

using ParamValue = std::variant<std::int64_t, double, bool, std::string>;

struct ParamSpec {
  std::string name{};
  ParamType type = ParamType::integer;
  std::string doc{};
  std::optional<ParamValue> default_value{};            // absent: the parameter is required
  std::map<std::string, ParamValue> variant_default{};  // per-variant default overrides
  double min = 0;                                       // inclusive lower bound (integer, real)
  double max = 0;  // upper bound (integer, real); max <= min means unbounded
  bool max_exclusive = false;
  bool odd_only = false;  // integers that must be odd (pooling kernels)
  std::vector<std::string> choices{};
  // ParamType::path: validates the file's content at plan time (throws std::invalid_argument
  // saying what is wrong; the caller names the file and the manifest position). May be empty.
  std::function<void(const std::string& path)> check_file{};
  // ParamType::path naming a DIRECTORY (RestoreKV's PEFT adapter): the files in it the method
  // reads; the plan requires a directory holding each as a regular file (then check_file gets the
  // directory) and fingerprints each. Empty: the path names a regular file.
  std::vector<std::string> directory_files{};
  // Stores a value of this parameter (already checked against type and range) into its member of
  // the method's MethodParams alternative.
  std::function<void(MethodParams&, const ParamValue&)> assign{};
};

// A configuration's parameters that do not fit together (MethodSpec::check_params).
struct ParamProblem {
  std::string param;    // the parameter the message is about
  std::string message;  // what is wrong, e.g. "must be greater than low_entropy_chunk_length (4)"
};

struct MethodSpec {
  std::string id;
  std::string summary;
  std::string citation;
  BudgetAxis axis;
  std::vector<std::string> variants;  // the first is the default; may be empty
  std::vector<ParamSpec> params;
  bool is_scorer;  // can be wrapped by adakv/chunkkv/criticalkv
  // The method's typed parameters with their defaults and `variant` (one of `variants`, or ""
  // for a method without variants) set; the params are then assigned on top.
  std::function<MethodParams(std::string_view variant)> typed_defaults{};
  // Constraints between parameters that per-parameter ranges cannot express (e.g. chunk_length >
  // low_entropy_chunk_length): the offending parameter and what is wrong, or nullopt.
  // resolve_method and the manifest (at the parameter's file position) refuse such a configuration.
  std::function<std::optional<ParamProblem>(const MethodParams&)> check_params{};
  // Methods whose parameters fix the budget (kvpress presses without a settable compression ratio:
  // per_layer_compression, composed): the compression ratio every cell must ask for. The manifest
  // refuses a grid ratio that differs (|Δ| > 1e-9) at plan time; select() checks it again.
  std::function<std::optional<double>(const MethodParams&)> fixed_compression{};
  // Threshold methods: whether a larger threshold keeps MORE (simlayerkv's lazy threshold τ: fewer
  // layers are lazy) rather than less (refreekv's T). Sets the conservative → aggressive order of
  // a certification block's candidates: decreasing thresholds when true.
  bool larger_threshold_keeps_more = false;
  // Threshold methods whose threshold is a score level of any sign (dms: KVzap's log-scale scores);
  // the others need thresholds > 0, and a grid's thresholds must suit every threshold method in it.
  bool thresholds_of_any_sign = false;
  // Scorers whose score of a candidate reads only that candidate's own entry (Scorer::per_entry:
  // knorm, kvzap): the ones dms with decoding = true can wrap (the manifest refuses others).
  bool per_entry_scorer = false;
};

const std::vector<MethodSpec>& method_catalog();
const MethodSpec* find_method(std::string_view id);
// "a, b, c": every method id, for error messages.
std::string method_id_list();

// The default of `param` under `variant` (the variant override, else the plain default).
std::optional<ParamValue> default_for(const ParamSpec& param, std::string_view variant);

}  // namespace kvaudit::methods
