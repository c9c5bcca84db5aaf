// RULER cwe (NVIDIA/RULER scripts/data/synthetic/common_words_extraction.py;
// docs/design/benchmarks.md §RULER task families): a numbered list "1. w 2. w …" in which 10 common
// words appear 30 times and the others 3 times (6 and 1 below 4096 tokens), shuffled with the fixed
// stream (RULER: random.Random(seed).shuffle, the same permutation for every list of one length);
// gold = the 10 common words. The vocabulary is wonderwords' nouns + adjectives + verbs, sorted,
// deduplicated and shuffled once with the fixed stream; an instance draws its words without
// replacement (the first 10 are the common ones, so they do not depend on the list size). One
// few-shot example of 40 words (counts 10 and 3; 20 words, 3 and 1 below 4096) comes first,
// rendered with the template and answer prefix plus " 1. a 2. b … 10. j", then "\n".
// Beyond RULER: RULER falls back to another word list when an instance needs more words than the
// wonderwords pool holds; kvaudit refuses such a length instead (max_units()).
#include <algorithm>

#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "suite/benchmarks/ruler/word_lists.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr std::size_t kCommon = 10;

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(i + 1) + ". " + words[i];
  }
  return out;
}

class CommonWordsBuilder final : public TaskBuilder {
 public:
  explicit CommonWordsBuilder(const BuilderContext& context) : context_(context) {
    pool_ = context_.words->cwe_pool;
    fixed_rng().shuffle(pool_);
    const auto& t = family_template(Family::common_words_extraction);
    template_ = std::string(t.template_text) + std::string(t.answer_prefix);
  }

  std::string_view unit_name() const override { return "word"; }
  std::size_t min_units() const override { return kCommon; }
  std::size_t probe_units() const override { return 10; }
  std::size_t max_units() const override { return pool_.size(); }

  InstanceDraft draft(std::uint32_t index) const override {
    const bool short_context = context_.length < 4096;
    RulerRng fewshot(context_.seed, context_.task_id, context_.length, index, RulerStream::fewshot);
    std::vector<std::string> example_common;
    const std::string example_list =
        example(fewshot, short_context ? 20 : 40, short_context ? 3 : 10, short_context ? 1 : 3,
                example_common);
    const std::string few_shot =
        format_template(template_, {{"context", example_list}}) + " " + numbered(example_common);
    return [this, index, few_shot, short_context](std::size_t units) {
      RulerRng content(context_.seed, context_.task_id, context_.length, index,
                       RulerStream::content);
      std::vector<std::string> common;
      const std::string list =
          example(content, units, short_context ? 6 : 30, short_context ? 1 : 3, common);
      return TaskText{few_shot + "\n" + format_template(template_, {{"context", list}}), common};
    };
  }

 private:
  RulerRng fixed_rng() const {
    return RulerRng(context_.seed, context_.task_id, context_.length, kFixedInstance,
                    RulerStream::fixed);
  }

  // RULER's get_example: `num_words` distinct words, the first 10 repeated `common_repeats` times
  // and the others `uncommon_repeats` times, shuffled with the fixed stream, numbered.
  std::string example(RulerRng& rng, std::size_t num_words, std::size_t common_repeats,
                      std::size_t uncommon_repeats, std::vector<std::string>& common) const {
    std::vector<std::string> drawn;
    for (const auto i : rng.sample_indices(pool_.size(), std::min(num_words, pool_.size()))) {
      drawn.push_back(pool_[i]);
    }
    const std::size_t n_common = std::min(kCommon, drawn.size());
    common.assign(drawn.begin(), drawn.begin() + static_cast<std::ptrdiff_t>(n_common));
    std::vector<std::string> list;
    for (std::size_t r = 0; r < common_repeats; ++r)
      list.insert(list.end(), common.begin(), common.end());
    for (std::size_t r = 0; r < uncommon_repeats; ++r) {
      list.insert(list.end(), drawn.begin() + static_cast<std::ptrdiff_t>(n_common), drawn.end());
    }
    fixed_rng().shuffle(list);
    return numbered(list);
  }

  BuilderContext context_;
  std::vector<std::string> pool_;
  std::string template_;
};

}  // namespace

std::unique_ptr<TaskBuilder> make_common_words_builder(const BuilderContext& context) {
  return std::make_unique<CommonWordsBuilder>(context);
}

}  // namespace kvaudit::benchmarks::ruler
