// RULER fwe (NVIDIA/RULER scripts/data/synthetic/freq_words_extraction.py;
// docs/design/benchmarks.md §RULER task families): a vocabulary of (L − max_new_tokens) // 50
// distinct random 6-letter
// lower-case words (drawn until that many are distinct, sorted, shuffled with the fixed stream),
// rank 0 replaced by "..." (noise); for a stream of N words the word of rank k (1-based) appears
// floor(N · k^−2 / ζ(2)) times; the stream is shuffled with the fixed stream and joined with
// spaces. Gold = ranks 2–4. RULER sizes N by a linear search (start L/6 words, step L/32); kvaudit
// uses the same search on N as the other tasks (the largest N that fits), which is at least as
// close to the target.
#include <algorithm>
#include <cmath>
#include <set>

#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr std::size_t kWordLength = 6;
constexpr double kZeta2 = 1.6449340668482264;  // ζ(2) = π²/6, scipy.special.zeta(2.0)

class FreqWordsBuilder final : public TaskBuilder {
 public:
  FreqWordsBuilder(const BuilderContext& context, int max_new_tokens) : context_(context) {
    const std::int64_t budget = static_cast<std::int64_t>(context_.length) - max_new_tokens;
    vocab_size_ = budget > 0 ? static_cast<std::size_t>(budget / 50) : 0;
    if (vocab_size_ < 5) {
      throw InputError("RULER fwe: length " + std::to_string(context_.length) +
                       " is too small (the vocabulary (L - 50) // 50 needs at least 5 words)");
    }
    const auto& t = family_template(Family::freq_words_extraction);
    template_ = std::string(t.template_text) + std::string(t.answer_prefix);
  }

  std::string_view unit_name() const override { return "word"; }
  std::size_t min_units() const override { return 10; }
  std::size_t probe_units() const override { return 100; }

  InstanceDraft draft(std::uint32_t index) const override {
    RulerRng content(context_.seed, context_.task_id, context_.length, index, RulerStream::content);
    std::vector<std::string> drawn;
    std::set<std::string> distinct;
    while (distinct.size() < vocab_size_) {
      drawn.push_back(content.letters("abcdefghijklmnopqrstuvwxyz", kWordLength));
      distinct.insert(drawn.back());
    }
    std::vector<std::string> vocab(distinct.begin(), distinct.end());
    fixed_rng().shuffle(vocab);
    vocab[0] = "...";
    std::vector<std::string> answers(vocab.begin() + 1, vocab.begin() + 4);
    return [this, vocab, answers](std::size_t units) {
      std::vector<const std::string*> stream;
      for (std::size_t k = 0; k < vocab.size(); ++k) {
        const double kk = static_cast<double>(k + 1);
        const auto count =
            static_cast<std::size_t>(static_cast<double>(units) * std::pow(kk, -2.0) / kZeta2);
        for (std::size_t c = 0; c < count; ++c) stream.push_back(&vocab[k]);
      }
      fixed_rng().shuffle(stream);
      std::string context;
      for (std::size_t i = 0; i < stream.size(); ++i) {
        if (i) context += ' ';
        context += *stream[i];
      }
      return TaskText{format_template(template_, {{"context", context}, {"query", ""}}), answers};
    };
  }

 private:
  RulerRng fixed_rng() const {
    return RulerRng(context_.seed, context_.task_id, context_.length, kFixedInstance,
                    RulerStream::fixed);
  }

  BuilderContext context_;
  std::size_t vocab_size_ = 0;
  std::string template_;
};

}  // namespace

std::unique_ptr<TaskBuilder> make_freq_words_builder(const BuilderContext& context,
                                                     int max_new_tokens) {
  return std::make_unique<FreqWordsBuilder>(context, max_new_tokens);
}

}  // namespace kvaudit::benchmarks::ruler
