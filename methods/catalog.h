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
  // Stores a value of this parameter (already checked against type and range) into its member of
  // the method's MethodParams alternative.
  std::function<void(MethodParams&, const ParamValue&)> assign{};
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
};

const std::vector<MethodSpec>& method_catalog();
const MethodSpec* find_method(std::string_view id);
// "a, b, c": every method id, for error messages.
std::string method_id_list();

// The default of `param` under `variant` (the variant override, else the plain default).
std::optional<ParamValue> default_for(const ParamSpec& param, std::string_view variant);

}  // namespace kvaudit::methods
