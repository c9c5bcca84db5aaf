// make_method: builds the Method of one method configuration (the shape of the manifest's
// MethodConfig, suite/manifest/manifest.h, without depending on suite/), validated against the
// catalogue (methods/catalog.h):
//   auto method = make_method({.name = "ada", .id = "adakv", .params = {{"scorer", "snap"}}},
//                             [&](const std::string& n) { return find_config(n); });
// `variant` "" means the catalogue's default variant; absent parameters take the catalogue's
// default for the variant. Wrappers (adakv, chunkkv, criticalkv) name their scorer's config in
// the string parameter `scorer`; `resolve` maps that name to its config (nullptr if unknown).
// Errors (std::invalid_argument, naming the config): unknown method id, variant or parameter, a
// parameter of the wrong type or out of range, a missing required parameter, an unresolvable
// scorer, a scorer reference to a method that is not a scorer (catalogue is_scorer), or a
// reference cycle.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "methods/catalog.h"
#include "methods/method.h"

namespace kvaudit::methods {

struct MethodConfig {
  std::string name;     // the config's name (messages only); may be empty
  std::string id;       // catalogue id, e.g. "snapkv"
  std::string variant;  // "" = the default variant
  std::map<std::string, ParamValue> params;
};

using ConfigResolver = std::function<const MethodConfig*(const std::string& name)>;

std::unique_ptr<Method> make_method(const MethodConfig& config, const ConfigResolver& resolve = {});

// The Scorer of a scorer method (catalogue is_scorer), as wrappers use it. keydiff "block" is a
// selection procedure, not a scorer, and is rejected; pyramidkv's scorer is its SnapKV scorer.
std::shared_ptr<const Scorer> make_scorer(const MethodConfig& config,
                                          const ConfigResolver& resolve = {});

}  // namespace kvaudit::methods
