// RULER niah tasks (NVIDIA/RULER scripts/data/synthetic/niah.py; docs/design/benchmarks.md
// §RULER task families):
// needles "One of the special magic {type} for {key} is: {value}." hidden in a noise, essay or
// needle haystack, then a question about 1 or 4 keys. Configurations (synthetic.yaml):
//   task             haystack  key    value  #k #v #q
//   niah_single_1    noise     words  numbers 1  1  1
//   niah_single_2    essay     words  numbers 1  1  1
//   niah_single_3    essay     words  uuids   1  1  1
//   niah_multikey_1  essay     words  numbers 4  1  1
//   niah_multikey_2  needle    words  numbers 1  1  1
//   niah_multikey_3  needle    uuids  uuids   1  1  1
//   niah_multivalue  essay     words  numbers 1  4  1
//   niah_multiquery  essay     words  numbers 1  1  4
// numbers: uniform 7-digit; words: adjective-noun; uuids: version-4 UUID strings. Needles are
// shuffled with the fixed stream (RULER: random.Random(seed).shuffle). Essay: needles go in at
// sentence boundaries int(#sentences · depth / 100) for depths drawn without replacement from the
// 40 rounded points of linspace(0, 100, 40), pieces joined with spaces; noise/needle: needles
// inserted at sorted random line indices (inserted from the largest index down), lines joined with
// "\n". When #q · #v = 1 the template is singularised ('Some'→'A', 'are all'→'is', 'are'→'is',
// 'answers'→'answer', type word without its final 's').
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "suite/benchmarks/ruler/essay.h"
#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "suite/benchmarks/ruler/word_lists.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

enum class Haystack { noise, essay, needle };
enum class NeedleType { numbers, words, uuids };

struct NiahConfig {
  Haystack haystack;
  NeedleType key;
  NeedleType value;
  std::size_t num_k, num_v, num_q;
};

NiahConfig config_of(const std::string& task) {
  using H = Haystack;
  using T = NeedleType;
  if (task == "niah_single_1") return {H::noise, T::words, T::numbers, 1, 1, 1};
  if (task == "niah_single_2") return {H::essay, T::words, T::numbers, 1, 1, 1};
  if (task == "niah_single_3") return {H::essay, T::words, T::uuids, 1, 1, 1};
  if (task == "niah_multikey_1") return {H::essay, T::words, T::numbers, 4, 1, 1};
  if (task == "niah_multikey_2") return {H::needle, T::words, T::numbers, 1, 1, 1};
  if (task == "niah_multikey_3") return {H::needle, T::uuids, T::uuids, 1, 1, 1};
  if (task == "niah_multivalue") return {H::essay, T::words, T::numbers, 1, 4, 1};
  if (task == "niah_multiquery") return {H::essay, T::words, T::numbers, 1, 1, 4};
  throw InternalError("RULER: '" + task + "' is no niah task");
}

std::string_view type_word(NeedleType t) {
  switch (t) {
    case NeedleType::numbers:
      return "numbers";
    case NeedleType::words:
      return "words";
    case NeedleType::uuids:
      return "uuids";
  }
  return "";
}

// The 40 depths of RULER: np.round(np.linspace(0, 100, num=40)).astype(int) (round half to even;
// no point is a tie).
std::vector<int> depths() {
  std::vector<int> d;
  for (int i = 0; i < 40; ++i) d.push_back(static_cast<int>(std::nearbyint(100.0 * i / 39.0)));
  return d;
}

class NiahBuilder final : public TaskBuilder {
 public:
  NiahBuilder(const TaskSpec& spec, const BuilderContext& context)
      : config_(config_of(spec.name)), context_(context) {
    config_.num_k = std::max(config_.num_k, config_.num_q);
    if (config_.haystack == Haystack::essay && context_.essay == nullptr) {
      throw InternalError("RULER " + spec.name + ": no essay loaded");
    }
    std::string full = std::string(family_template(Family::niah).template_text) +
                       std::string(family_template(Family::niah).answer_prefix);
    type_word_ = type_word(config_.value);
    if (config_.num_q * config_.num_v == 1) {
      full = replace_all(full, "Some", "A");
      full = replace_all(full, "are all", "is");
      full = replace_all(full, "are", "is");
      full = replace_all(full, "answers", "answer");
      type_word_.pop_back();
    }
    template_ = std::move(full);
  }

  std::string_view unit_name() const override {
    switch (config_.haystack) {
      case Haystack::essay:
        return "word";
      case Haystack::noise:
        return "sentence";
      case Haystack::needle:
        return "needle";
    }
    return "";
  }
  std::size_t min_units() const override {
    return config_.haystack == Haystack::essay ? 1 : config_.num_k * config_.num_v;
  }
  std::size_t probe_units() const override {
    if (config_.haystack == Haystack::essay) return 500;
    return context_.length < 4096 ? 5 : 25;
  }

  InstanceDraft draft(std::uint32_t index) const override {
    RulerRng content(context_.seed, context_.task_id, context_.length, index, RulerStream::content);
    std::vector<std::string> keys;
    std::vector<std::vector<std::string>> values;
    std::vector<std::string> needles;
    for (std::size_t k = 0; k < config_.num_k; ++k) {
      keys.push_back(random_of(config_.key, content));
      values.emplace_back();
      for (std::size_t v = 0; v < config_.num_v; ++v) {
        values.back().push_back(random_of(config_.value, content));
        needles.push_back(needle(keys.back(), values.back().back()));
      }
    }
    RulerRng fixed(context_.seed, context_.task_id, context_.length, kFixedInstance,
                   RulerStream::fixed);
    fixed.shuffle(needles);
    std::vector<int> needle_depths;
    if (config_.haystack == Haystack::essay) {
      const auto all = depths();
      for (const auto i : content.sample_indices(all.size(), needles.size())) {
        needle_depths.push_back(all[i]);
      }
    }
    const auto picked = content.sample_indices(config_.num_k, config_.num_q);
    std::vector<std::string> queries;
    std::vector<std::string> answers;
    for (const auto i : picked) {
      queries.push_back(keys[i]);
      answers.insert(answers.end(), values[i].begin(), values[i].end());
    }
    std::string query = queries.back();
    if (queries.size() > 1) {
      query.clear();
      for (std::size_t i = 0; i + 1 < queries.size(); ++i) query += (i ? ", " : "") + queries[i];
      query += ", and " + queries.back();
    }
    return [this, index, needles, needle_depths, query, answers](std::size_t units) {
      const std::string context = haystack(index, needles, needle_depths, units);
      return TaskText{
          format_template(template_,
                          {{"type_needle_v", type_word_}, {"context", context}, {"query", query}}),
          answers};
    };
  }

 private:
  std::string random_of(NeedleType type, RulerRng& rng) const {
    switch (type) {
      case NeedleType::numbers:
        return std::to_string(rng.between(1000000, 9999999));
      case NeedleType::words: {
        const auto& adjectives = context_.words->adjectives;
        const auto& nouns = context_.words->nouns;
        const auto& a = adjectives[static_cast<std::size_t>(rng.below(adjectives.size()))];
        return a + "-" + nouns[static_cast<std::size_t>(rng.below(nouns.size()))];
      }
      case NeedleType::uuids:
        return rng.uuid4();
    }
    return {};
  }

  std::string needle(const std::string& key, const std::string& value) const {
    return format_template(
        kNeedleTemplate,
        {{"type_needle_v", type_word(config_.value)}, {"key", key}, {"value", value}});
  }

  std::string haystack(std::uint32_t index, const std::vector<std::string>& needles,
                       const std::vector<int>& needle_depths, std::size_t units) const {
    if (config_.haystack == Haystack::essay) {
      const auto sentences = split_sentences(context_.essay->first_words(units));
      std::vector<std::size_t> positions = {0};
      for (const int d : needle_depths) {
        positions.push_back(static_cast<std::size_t>(static_cast<double>(sentences.size()) *
                                                     (static_cast<double>(d) / 100.0)));
      }
      std::sort(positions.begin() + 1, positions.end());
      positions.push_back(sentences.size());
      std::string out;
      for (std::size_t i = 1; i < positions.size(); ++i) {
        std::string piece;
        for (std::size_t s = positions[i - 1]; s < positions[i]; ++s) {
          if (s > positions[i - 1]) piece += ' ';
          piece += sentences[s];
        }
        if (i > 1) out += ' ';
        out += piece;
        if (i - 1 < needles.size()) {
          out += ' ';
          out += needles[i - 1];
        }
      }
      return out;
    }
    RulerRng layout(context_.seed, context_.task_id, context_.length, index, RulerStream::layout);
    std::vector<std::string> lines;
    lines.reserve(units + needles.size());
    for (std::size_t i = 0; i < units; ++i) {
      if (config_.haystack == Haystack::noise) {
        lines.emplace_back(kNoiseSentence);
      } else {
        const std::string key = random_of(config_.key, layout);
        lines.push_back(needle(key, random_of(config_.value, layout)));
      }
    }
    auto at = layout.sample_indices(units, needles.size());
    std::sort(at.begin(), at.end(), std::greater<>());
    for (std::size_t i = 0; i < at.size(); ++i) {
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at[i]), needles[i]);
    }
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += '\n';
      out += lines[i];
    }
    return out;
  }

  NiahConfig config_;
  BuilderContext context_;
  std::string template_;
  std::string type_word_;
};

}  // namespace

std::unique_ptr<TaskBuilder> make_niah_builder(const TaskSpec& spec,
                                               const BuilderContext& context) {
  return std::make_unique<NiahBuilder>(spec, context);
}

}  // namespace kvaudit::benchmarks::ruler
