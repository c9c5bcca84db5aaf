// The whole-lock verification (see prereg_check.h).
#include "suite/manifest/prereg_check.h"

#include <string>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/prereg.h"

namespace kvaudit::manifest {
namespace {

using nlohmann::json;

class LockVerifier {
 public:
  LockVerifier(const json& lock, const std::filesystem::path& file) : lock_(lock), file_(file) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InputError(file_.string() + ": " + field + ": " + what +
                     " (the preregistration lock is damaged or was edited; it must be the file "
                     "`kvaudit plan` wrote)");
  }

  const json& field(const json& parent, const std::string& where, const char* key) const {
    const std::string name = where.empty() ? key : where + "." + key;
    if (!parent.contains(key)) fail(name, "missing");
    return parent.at(key);
  }

  const json& typed(const json& parent, const std::string& where, const char* key,
                    json::value_t type) const {
    const json& v = field(parent, where, key);
    const std::string name = where.empty() ? key : where + "." + key;
    check_type(v, name, type);
    return v;
  }

  void check_type(const json& v, const std::string& name, json::value_t type) const {
    bool ok = false;
    const char* want = "";
    switch (type) {
      case json::value_t::string:
        ok = v.is_string(), want = "a string";
        break;
      case json::value_t::object:
        ok = v.is_object(), want = "an object";
        break;
      case json::value_t::array:
        ok = v.is_array(), want = "an array";
        break;
      case json::value_t::boolean:
        ok = v.is_boolean(), want = "true or false";
        break;
      case json::value_t::number_unsigned:
        ok = v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0),
        want = "a non-negative integer";
        break;
      case json::value_t::number_float:
        ok = v.is_number(), want = "a number";
        break;
      default:
        ok = v.type() == type, want = "of another type";
    }
    if (!ok)
      fail(name, "must be " + std::string(want) + ", found " + v.type_name() + " " + v.dump());
  }

  void check_sha256(const json& v, const std::string& name) const {
    const std::string s = v.get<std::string>();
    if (s.size() != 64 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail(name, "must be 64 lowercase hex digits, found \"" + s + "\"");
  }

  void run() const {
    if (!lock_.is_object())
      fail("(top level)", "must be a JSON object, found " + std::string(lock_.type_name()));
    const json& schema = field(lock_, "", "kvaudit_prereg_schema");
    if (!schema.is_number_integer()) fail("kvaudit_prereg_schema", "must be an integer");
    const int version = schema.get<int>();
    if (version < kOldestPreregSchema || version > kPreregSchema)
      throw InputError(file_.string() + ": preregistration schema " + std::to_string(version) +
                       " is not supported by this kvaudit (it reads " +
                       std::to_string(kOldestPreregSchema) + " to " +
                       std::to_string(kPreregSchema) + ")");
    typed(lock_, "", "study", json::value_t::string);
    check_sha256(typed(lock_, "", "manifest_sha256", json::value_t::string), "manifest_sha256");
    typed(lock_, "", "manifest_path", json::value_t::string);
    const json& canonical = typed(lock_, "", "canonical_manifest", json::value_t::object);
    const std::string text = canonical.dump(-1, ' ', false, json::error_handler_t::strict);
    const std::string hash = sha256_hex(text);
    if (hash != lock_.at("manifest_sha256").get<std::string>())
      fail("canonical_manifest", "hashes to " + hash + ", not to the lock's manifest_sha256 " +
                                     lock_.at("manifest_sha256").get<std::string>());
    if (canonical.contains("study") && canonical["study"].is_object() &&
        canonical["study"].contains("name") && canonical["study"]["name"] != lock_.at("study"))
      fail("study", "is " + lock_.at("study").dump() + ", the canonical manifest names " +
                        canonical["study"]["name"].dump());
    contracts();
    splits();
    counts();
    tool();
    typed(lock_, "", "created_utc", json::value_t::string);
    if (version >= 2) inputs();
  }

 private:
  void contracts() const {
    const json& list = typed(lock_, "", "contracts", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "contracts[" + std::to_string(i) + "]";
      check_type(list[i], where, json::value_t::object);
      typed(list[i], where, "name", json::value_t::string);
      for (const char* key : {"tau", "epsilon", "delta"})
        typed(list[i], where, key, json::value_t::number_float);
      const json& candidates = typed(list[i], where, "candidates", json::value_t::array);
      for (std::size_t k = 0; k < candidates.size(); ++k)
        check_type(candidates[k], where + ".candidates[" + std::to_string(k) + "]",
                   json::value_t::number_float);
      const json& models = typed(list[i], where, "models", json::value_t::array);
      for (std::size_t k = 0; k < models.size(); ++k)
        check_type(models[k], where + ".models[" + std::to_string(k) + "]", json::value_t::string);
      contract_kind(list[i], where);
    }
  }

  // The contract-kind fields, present only when they differ from the original contract.
  void contract_kind(const json& contract, const std::string& where) const {
    if (contract.contains("risks")) {
      const json& risks = typed(contract, where, "risks", json::value_t::array);
      for (std::size_t k = 0; k < risks.size(); ++k)
        check_type(risks[k], where + ".risks[" + std::to_string(k) + "]", json::value_t::string);
    }
    for (const char* key : {"bound", "procedure"})
      if (contract.contains(key)) typed(contract, where, key, json::value_t::string);
    if (contract.contains("loss_epsilon"))
      typed(contract, where, "loss_epsilon", json::value_t::number_float);
    if (contract.contains("starts"))
      typed(contract, where, "starts", json::value_t::number_unsigned);
    for (const char* key : {"per_task", "sequential"})
      if (contract.contains(key)) typed(contract, where, key, json::value_t::boolean);
  }

  void splits() const {
    const json& per_benchmark = typed(lock_, "", "splits", json::value_t::object);
    for (const auto& [benchmark, tasks] : per_benchmark.items()) {
      const std::string where = "splits." + benchmark;
      check_type(tasks, where, json::value_t::object);
      for (const auto& [task, parts] : tasks.items()) {
        const std::string at = where + "." + task;
        check_type(parts, at, json::value_t::object);
        for (const char* part : {"calibration", "test"}) {
          const json& list = typed(parts, at, part, json::value_t::array);
          for (std::size_t k = 0; k < list.size(); ++k)
            check_type(list[k], at + "." + part + "[" + std::to_string(k) + "]",
                       json::value_t::number_unsigned);
        }
      }
    }
  }

  void counts() const {
    const json& c = typed(lock_, "", "counts", json::value_t::object);
    typed(c, "counts", "units", json::value_t::number_unsigned);
    typed(c, "counts", "cells", json::value_t::number_unsigned);
    typed(c, "counts", "grids", json::value_t::array);
    const json& families = typed(c, "counts", "bonferroni_families", json::value_t::array);
    for (std::size_t i = 0; i < families.size(); ++i) {
      const std::string where = "counts.bonferroni_families[" + std::to_string(i) + "]";
      check_type(families[i], where, json::value_t::object);
      typed(families[i], where, "name", json::value_t::string);
      typed(families[i], where, "analysis", json::value_t::string);
      typed(families[i], where, "over", json::value_t::array);
      typed(families[i], where, "m", json::value_t::number_unsigned);
    }
  }

  void tool() const {
    const json& t = typed(lock_, "", "tool", json::value_t::object);
    for (const char* key : {"name", "version", "git_commit", "git_dirty", "build_type", "compiler"})
      typed(t, "tool", key, json::value_t::string);
  }

  void inputs() const {
    const json& list = typed(lock_, "", "inputs", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "inputs[" + std::to_string(i) + "]";
      check_type(list[i], where, json::value_t::object);
      for (const char* key : {"input", "file", "path"})
        typed(list[i], where, key, json::value_t::string);
      typed(list[i], where, "bytes", json::value_t::number_unsigned);
      check_sha256(typed(list[i], where, "sha256", json::value_t::string), where + ".sha256");
    }
  }

  const json& lock_;
  const std::filesystem::path& file_;
};

}  // namespace

void verify_prereg(const json& lock, const std::filesystem::path& lock_file) {
  LockVerifier(lock, lock_file).run();
}

}  // namespace kvaudit::manifest
