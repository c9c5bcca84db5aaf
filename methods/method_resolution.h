// resolve_method: one method configuration (the shape of the manifest's MethodConfig,
// suite/manifest/manifest.h, without depending on suite/) checked against the catalogue
// (catalog.h) and turned into the method's typed parameters (method_params.h):
//   const ResolvedMethod r = resolve_method({.name = "ada", .id = "adakv",
//                                            .params = {{"scorer", "snap"}}}, resolver);
//   std::get<AdaKvParams>(r.params).alpha;    // 0.2, the default
//   r.scorer->params;                          // the "snap" config's SnapKvParams
// `variant` "" means the catalogue's default variant; absent parameters take the catalogue's
// default for the variant. Wrappers (adakv, chunkkv, criticalkv) name their scorer's config in the
// parameter `scorer`; `resolve` maps that name to its config (nullptr if unknown), and the scorer
// is resolved too (ResolvedMethod::scorer).
// Errors (std::invalid_argument, naming the config): unknown method id, variant or parameter, a
// parameter of the wrong type or out of range, a missing required parameter, an unresolvable
// scorer, a scorer reference to a method that is not a scorer (catalogue is_scorer), or a
// reference cycle.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "methods/catalog.h"
#include "methods/method_params.h"

namespace kvaudit::methods {

struct MethodConfig {
  std::string name;     // the config's name (messages only); may be empty
  std::string id;       // catalogue id, e.g. "snapkv"
  std::string variant;  // "" = the default variant
  std::map<std::string, ParamValue> params;
};

using ConfigResolver = std::function<const MethodConfig*(const std::string& name)>;

struct ResolvedMethod {
  const MethodSpec* spec = nullptr;
  std::string name;     // the config's name (may be empty)
  std::string variant;  // resolved: one of spec->variants, or "" for a method without variants
  MethodParams params;  // every parameter, typed, defaults filled in
  // Wrappers: the resolved configuration their `scorer` names; null otherwise.
  std::shared_ptr<const ResolvedMethod> scorer;
  // method_ref_list parameters (composed's presses): the resolved configurations, in order.
  std::vector<std::shared_ptr<const ResolvedMethod>> stages;

  // "method config 'name' (id)" — how errors name it.
  std::string label() const;
};

ResolvedMethod resolve_method(const MethodConfig& config, const ConfigResolver& resolve = {});

// The largest observation window the method reads through its own parameters or its scorer's
// (following `scorer` references), with the name of the config that declares it; nullopt when
// neither has a window.
struct ObservationWindow {
  int size = 0;
  std::string owner;
};
std::optional<ObservationWindow> observation_window(const ResolvedMethod& method);

}  // namespace kvaudit::methods
