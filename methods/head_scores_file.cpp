// The HeadKV head-importance file (head_scores_file.h).
#include "methods/head_scores_file.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace kvaudit::methods {
namespace {

using nlohmann::json;

[[noreturn]] void fail_head_scores(const std::string& what) { throw std::invalid_argument(what); }

// "<layer>-<head>" → (layer, head); nullopt-like failure by throwing.
std::pair<int, int> parse_head_key(const std::string& key) {
  const auto dash = key.find('-');
  auto number = [&](std::string_view text) {
    int value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
      fail_head_scores("key '" + key + "' is not \"<layer>-<head>\" with non-negative integers");
    return value;
  };
  if (dash == std::string::npos)
    fail_head_scores("key '" + key + "' is not \"<layer>-<head>\" with non-negative integers");
  const std::string_view all(key);
  return {number(all.substr(0, dash)), number(all.substr(dash + 1))};
}

double score_of(const std::string& key, const json& value) {
  auto finite_non_negative = [&](const json& v) {
    if (!v.is_number())
      fail_head_scores("value of '" + key + "' is not a number or a list of numbers");
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail_head_scores("value of '" + key + "' is not finite");
    if (x < 0) fail_head_scores("value of '" + key + "' is negative (" + std::to_string(x) + ")");
    return x;
  };
  if (!value.is_array()) return finite_non_negative(value);
  if (value.empty()) fail_head_scores("value of '" + key + "' is an empty list");
  double sum = 0.0;
  for (const json& v : value) sum += finite_non_negative(v);
  return sum / static_cast<double>(value.size());
}

}  // namespace

HeadScores parse_head_scores(const std::string& json_text) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // syntax errors, numbers beyond double
    fail_head_scores(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!root.is_object() || root.empty())
    fail_head_scores(
        "expected a non-empty JSON object {\"<layer>-<head>\": score or [scores], ...}");
  std::map<std::pair<int, int>, double> by_head;
  int layers = 0;
  int heads = 0;
  for (const auto& [key, value] : root.items()) {
    const auto [layer, head] = parse_head_key(key);
    if (!by_head.emplace(std::pair{layer, head}, score_of(key, value)).second)
      fail_head_scores("head " + std::to_string(layer) + "-" + std::to_string(head) +
                       " appears twice");
    layers = std::max(layers, layer + 1);
    heads = std::max(heads, head + 1);
  }
  if (by_head.size() != static_cast<std::size_t>(layers) * static_cast<std::size_t>(heads)) {
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h)
        if (!by_head.count({l, h}))
          fail_head_scores("keys do not cover " + std::to_string(layers) + " layers × " +
                           std::to_string(heads) + " heads: '" + std::to_string(l) + "-" +
                           std::to_string(h) + "' is missing");
  }
  HeadScores out{.layers = layers, .heads = heads, .score = {}};
  out.score.reserve(by_head.size());
  double total = 0.0;
  for (const auto& [where, score] : by_head) {  // std::map order: layer-major
    out.score.push_back(score);
    total += score;
  }
  if (!(total > 0))
    fail_head_scores("every head score is 0 (the budget cannot be distributed by score)");
  return out;
}

HeadScores read_head_scores(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_head_scores("cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_head_scores(text.str());
}

}  // namespace kvaudit::methods
