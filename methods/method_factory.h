// make_method: builds the Method of one method configuration from its typed parameters
// (method_resolution.h resolves and checks the configuration against the catalogue first):
//   auto method = make_method({.name = "ada", .id = "adakv", .params = {{"scorer", "snap"}}},
//                             [&](const std::string& n) { return find_config(n); });
// The built method records its typed parameters (Method::parameters()). Errors are
// resolve_method's (std::invalid_argument naming the config).
#pragma once

#include <memory>
#include <string>

#include "methods/method.h"
#include "methods/method_resolution.h"

namespace kvaudit::methods {

std::unique_ptr<Method> make_method(const ResolvedMethod& method);
std::unique_ptr<Method> make_method(const MethodConfig& config, const ConfigResolver& resolve = {});

// The Scorer of a scorer method (catalogue is_scorer), as wrappers use it. keydiff "block" is a
// selection procedure, not a scorer, and is rejected; pyramidkv's scorer is its SnapKV scorer.
std::shared_ptr<const Scorer> make_scorer(const ResolvedMethod& method);
std::shared_ptr<const Scorer> make_scorer(const MethodConfig& config,
                                          const ConfigResolver& resolve = {});

}  // namespace kvaudit::methods
