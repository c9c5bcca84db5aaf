// resolve_method and observation_window (method_resolution.h): the catalogue's one description of
// each parameter turned into typed values.
#include "methods/method_resolution.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "methods/param_lists.h"

namespace kvaudit::methods {
namespace {

std::string label_of(const std::string& name, const std::string& id) {
  return name.empty() ? "method config (" + id + ")" : "method config '" + name + "' (" + id + ")";
}

[[noreturn]] void fail_config(const MethodConfig& c, const std::string& what) {
  throw std::invalid_argument(label_of(c.name, c.id) + ": " + what);
}

std::string type_name(ParamType t) {
  switch (t) {
    case ParamType::integer:
      return "an integer";
    case ParamType::real:
      return "a number";
    case ParamType::boolean:
      return "a boolean";
    case ParamType::choice:
      return "one of the listed choices";
    case ParamType::method_ref:
      return "the name of a method config";
    case ParamType::path:
      return "a file path";
    case ParamType::real_list:
      return "a non-empty array of numbers";
    case ParamType::method_ref_list:
      return "a non-empty array of method config names";
  }
  return "?";
}

void check_value(const MethodConfig& c, const ParamSpec& p, const ParamValue& v) {
  const std::string where = "parameter '" + p.name + "'";
  double number = 0;
  switch (p.type) {
    case ParamType::integer:
      if (!std::holds_alternative<std::int64_t>(v))
        fail_config(c, where + " must be " + type_name(p.type));
      number = static_cast<double>(std::get<std::int64_t>(v));
      if (p.odd_only && std::get<std::int64_t>(v) % 2 == 0) fail_config(c, where + " must be odd");
      break;
    case ParamType::real:
      if (const auto* i = std::get_if<std::int64_t>(&v)) {
        number = static_cast<double>(*i);
      } else if (const auto* d = std::get_if<double>(&v)) {
        number = *d;
        if (!std::isfinite(number)) fail_config(c, where + " must be finite");
      } else {
        fail_config(c, where + " must be " + type_name(p.type));
      }
      break;
    case ParamType::boolean:
      if (!std::holds_alternative<bool>(v)) fail_config(c, where + " must be " + type_name(p.type));
      return;
    case ParamType::choice: {
      const auto* s = std::get_if<std::string>(&v);
      if (s == nullptr) fail_config(c, where + " must be a string");
      for (const auto& choice : p.choices)
        if (choice == *s) return;
      std::string list;
      for (const auto& choice : p.choices) list += (list.empty() ? "" : ", ") + choice;
      fail_config(c, where + " is '" + *s + "', expected one of: " + list);
    }
    case ParamType::method_ref:
    case ParamType::path:
      if (!std::holds_alternative<std::string>(v) || std::get<std::string>(v).empty())
        fail_config(c, where + " must be " + type_name(p.type));
      return;
    case ParamType::real_list: {
      // The canonical string form of methods/param_lists.h; every element within the bounds.
      const auto* s = std::get_if<std::string>(&v);
      const auto values = s != nullptr ? parse_real_list(*s) : std::nullopt;
      if (!values) fail_config(c, where + " must be " + type_name(p.type));
      for (std::size_t i = 0; i < values->size(); ++i) {
        const double x = (*values)[i];
        const std::string item = where + "[" + std::to_string(i) + "] = " + std::to_string(x);
        if (x < p.min) fail_config(c, item + " is below " + std::to_string(p.min));
        if (p.max > p.min && (p.max_exclusive ? x >= p.max : x > p.max))
          fail_config(c, item + " is above " + std::to_string(p.max));
      }
      return;
    }
    case ParamType::method_ref_list: {
      const auto* s = std::get_if<std::string>(&v);
      if (s == nullptr || s->empty()) fail_config(c, where + " must be " + type_name(p.type));
      for (const auto& name : split_name_list(*s))
        if (name.empty()) fail_config(c, where + " has an empty name");
      return;
    }
  }
  if (number < p.min)
    fail_config(c, where + " = " + std::to_string(number) + " is below " + std::to_string(p.min));
  if (p.max > p.min && (p.max_exclusive ? number >= p.max : number > p.max))
    fail_config(c, where + " = " + std::to_string(number) + " is above " + std::to_string(p.max));
}

// The config alone: variant, parameter types and ranges, defaults; typed values.
ResolvedMethod resolve_own(const MethodConfig& c) {
  ResolvedMethod r;
  r.name = c.name;
  r.spec = find_method(c.id);
  if (r.spec == nullptr)
    fail_config(c, "unknown method '" + c.id + "'; known methods: " + method_id_list());
  r.variant = c.variant;
  if (r.variant.empty()) {
    if (!r.spec->variants.empty()) r.variant = r.spec->variants.front();
  } else {
    bool known = false;
    std::string list;
    for (const auto& v : r.spec->variants) {
      known = known || v == r.variant;
      list += (list.empty() ? "" : ", ") + v;
    }
    if (!known)
      fail_config(c, "unknown variant '" + r.variant + "'" +
                         (list.empty() ? " (the method has no variants)" : "; variants: " + list));
  }
  for (const auto& [name, value] : c.params) {
    const ParamSpec* spec = nullptr;
    for (const auto& p : r.spec->params)
      if (p.name == name) spec = &p;
    if (spec == nullptr) fail_config(c, "unknown parameter '" + name + "'");
    // The variant's own default is valid as given: the manifest parser writes defaults into the
    // config, and a default may be a "none" (duo_attention on_the_fly's pattern "" = no file).
    const auto fallback = default_for(*spec, r.variant);
    if (!(fallback && *fallback == value)) check_value(c, *spec, value);
  }
  r.params = r.spec->typed_defaults(r.variant);
  for (const auto& p : r.spec->params) {
    if (auto it = c.params.find(p.name); it != c.params.end()) {
      p.assign(r.params, it->second);
    } else if (auto def = default_for(p, r.variant)) {
      p.assign(r.params, *def);
    } else {
      fail_config(c, "missing required parameter '" + p.name + "'");
    }
  }
  if (r.spec->check_params) {
    if (const auto problem = r.spec->check_params(r.params))
      fail_config(c, "parameter '" + problem->param + "': " + problem->message);
  }
  return r;
}

ResolvedMethod resolve_with_scorer(const MethodConfig& c, const ConfigResolver& resolve,
                                   std::set<std::string>& visiting) {
  ResolvedMethod r = resolve_own(c);
  // method_ref_list parameters (composed's presses): every name resolved as a scorer, in order.
  for (const auto& p : r.spec->params) {
    if (p.type != ParamType::method_ref_list) continue;
    const auto it = c.params.find(p.name);
    if (it == c.params.end()) continue;  // resolve_own has refused a missing required list
    for (const auto& name : split_name_list(std::get<std::string>(it->second))) {
      const std::string names = "parameter '" + p.name + "' names '" + name + "'";
      if (!resolve) fail_config(c, names + " but no config resolver was given");
      const MethodConfig* inner = resolve(name);
      if (inner == nullptr) fail_config(c, names + ", which is not defined");
      if (!visiting.insert(name).second)
        fail_config(c, "scorer reference cycle through '" + name + "'");
      const MethodSpec* spec = find_method(inner->id);
      // ThinK (think.h) prunes key channels, not positions: composed takes it as its last press.
      const bool key_channel_stage = inner->id == "think" && p.name == "presses";
      if (key_channel_stage && name != split_name_list(std::get<std::string>(it->second)).back())
        fail_config(c, "parameter '" + p.name + "' names '" + name +
                           "' (think) before another press; think must be the last press");
      if (spec != nullptr && !spec->is_scorer && !key_channel_stage)
        fail_config(c, "parameter '" + p.name + "' names '" + name + "' (" + inner->id +
                           "), which is not a scorer; wrappers take one of the scorer methods");
      auto stage = std::make_shared<ResolvedMethod>(resolve_with_scorer(*inner, resolve, visiting));
      if (const auto* keydiff = std::get_if<KeyDiffParams>(&stage->params);
          keydiff != nullptr && keydiff->variant == KeyDiffVariant::block) {
        fail_config(
            *inner,
            "keydiff variant 'block' is a block-iterative selection, not a scorer; wrap keydiff "
            "variant 'oneshot'");
      }
      visiting.erase(name);
      r.stages.push_back(std::move(stage));
    }
  }
  const std::string* ref = scorer_reference(r.params);
  if (ref == nullptr) return r;
  if (!resolve)
    fail_config(c, "parameter 'scorer' names '" + *ref + "' but no config resolver was given");
  const MethodConfig* inner = resolve(*ref);
  if (inner == nullptr)
    fail_config(c, "parameter 'scorer' names '" + *ref + "', which is not defined");
  if (!visiting.insert(*ref).second)
    fail_config(c, "scorer reference cycle through '" + *ref + "'");
  const MethodSpec* spec = find_method(inner->id);
  if (spec != nullptr && !spec->is_scorer)
    fail_config(c, "parameter 'scorer' names '" + *ref + "' (" + inner->id +
                       "), which is not a scorer; wrappers take one of the scorer methods");
  auto scorer = std::make_shared<ResolvedMethod>(resolve_with_scorer(*inner, resolve, visiting));
  if (const auto* keydiff = std::get_if<KeyDiffParams>(&scorer->params);
      keydiff != nullptr && keydiff->variant == KeyDiffVariant::block) {
    fail_config(
        *inner,
        "keydiff variant 'block' is a block-iterative selection, not a scorer; wrap keydiff "
        "variant 'oneshot'");
  }
  visiting.erase(*ref);
  r.scorer = std::move(scorer);
  return r;
}

}  // namespace

std::string ResolvedMethod::label() const {
  return label_of(name, spec != nullptr ? spec->id : std::string("?"));
}

ResolvedMethod resolve_method(const MethodConfig& config, const ConfigResolver& resolve) {
  std::set<std::string> visiting;
  if (!config.name.empty()) visiting.insert(config.name);
  return resolve_with_scorer(config, resolve, visiting);
}

std::optional<ObservationWindow> observation_window(const ResolvedMethod& method) {
  std::optional<ObservationWindow> window;
  if (const int own = declared_window(method.params); own > 0) {
    window = ObservationWindow{own, method.name};
  }
  if (method.scorer) {
    const std::optional<ObservationWindow> inner = observation_window(*method.scorer);
    if (inner && (!window || inner->size > window->size)) window = inner;
  }
  for (const auto& stage : method.stages) {
    const std::optional<ObservationWindow> inner = observation_window(*stage);
    if (inner && (!window || inner->size > window->size)) window = inner;
  }
  return window;
}

}  // namespace kvaudit::methods
