// The two stages that watch the generated text: a lazy grammar (armed by a
// trigger) and a thinking budget (forces the reasoning's close).
#include <algorithm>
#include <memory>
#include <span>

#include "grammar_mask.h"
#include "text_watch.h"

namespace ferrox {

namespace sampling_detail {

void keep_grammar_allowed(grammar::GrammarMatcher& matcher, std::vector<uint64_t>& mask,
                          Candidates& c, std::string& error) {
    if (auto ok = matcher.allowed(mask); !ok) {
        error = ok.error().message();
        c.c.clear();
        return;
    }
    const auto allowed = [&](const Candidate& x) {
        const auto id = static_cast<size_t>(x.id);
        return id / 64 < mask.size() && (mask[id / 64] >> (id % 64)) & 1;
    };
    c.c.erase(std::remove_if(c.c.begin(), c.c.end(), [&](const auto& x) { return !allowed(x); }),
              c.c.end());
    if (c.c.empty()) error = "grammar: no token of the vocabulary can continue the grammar";
    c.has_p = false;  // the order stays; the mass does not
}

}  // namespace sampling_detail

namespace {

using sampling_detail::TextWatch;

// A token's bytes, or none for an id outside the vocabulary.
std::string_view piece_of(const grammar::TokenTrie& vocab, int32_t token) {
    if (token < 0 || static_cast<size_t>(token) >= vocab.vocab_size()) return {};
    return vocab.piece(token);
}

class LazyGrammarStage final : public SamplerStage {
  public:
    LazyGrammarStage(LazyGrammarParams p, std::shared_ptr<const grammar::TokenTrie> vocab)
        : params_(std::make_shared<const LazyGrammarParams>(std::move(p))),
          vocab_(std::move(vocab)),
          matcher_(params_->grammar, vocab_),
          patterns_(watched(*params_)),
          watch_(patterns_) {
        restart();
    }
    const char* name() const override { return "lazy-grammar"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        // Not armed: the candidates are left exactly as they came, so the
        // draw is the one a chain without this stage makes.
        if (!armed_) return -1;
        if (!error_.empty()) {  // the trigger's token already broke the grammar
            c.c.clear();
            return -1;
        }
        sampling_detail::keep_grammar_allowed(matcher_, mask_, c, error_);
        return -1;
    }
    void accept(int32_t token) override {
        if (armed_) {
            if (auto ok = matcher_.accept(token); !ok) error_ = ok.error().message();
            return;
        }
        const std::string_view piece = piece_of(*vocab_, token);
        if (in_reasoning_) {
            // Only the block's end is looked for; triggers count after it.
            if (watch_.feed(piece, std::span(patterns_).first(1))) in_reasoning_ = false;
            return;
        }
        for (const LazyTriggerToken& t : params_->trigger_tokens)
            if (t.id == token) return arm(t.text);
        // The triggers, then the reasoning's start (last).
        const auto hit = watch_.feed(piece, std::span(patterns_).subspan(1));
        if (!hit) return;
        if (hit->pattern + 2 == patterns_.size())
            in_reasoning_ = true;
        else
            arm(hit->from);
    }
    void restart() override {
        in_reasoning_ = params_->starts_in_reasoning && !params_->reasoning_end.empty();
        armed_ = false;
        matcher_.restart();
        watch_.clear();
        error_.clear();
    }
    std::string error() const override { return error_; }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<LazyGrammarStage>(*this);
    }

  private:
    // From here on the grammar holds, starting at the trigger's first byte.
    void arm(std::string_view from) {
        armed_ = true;
        matcher_.restart();
        if (auto ok = matcher_.accept_bytes(from); !ok)
            error_ = "lazy grammar: the text from its trigger on: " + ok.error().message();
    }

    // What the watch looks for: [0] the reasoning's end, then the triggers,
    // then the reasoning's start (only at the answer's start).
    static std::vector<LazyTrigger> watched(const LazyGrammarParams& p) {
        std::vector<LazyTrigger> out{{p.reasoning_end, false}};
        out.insert(out.end(), p.triggers.begin(), p.triggers.end());
        out.push_back({p.reasoning_start, true});
        return out;
    }

    std::shared_ptr<const LazyGrammarParams> params_;  // shared by the clones
    std::shared_ptr<const grammar::TokenTrie> vocab_;
    grammar::GrammarMatcher matcher_;
    std::vector<LazyTrigger> patterns_;
    TextWatch watch_;
    bool in_reasoning_ = false;
    bool armed_ = false;
    std::vector<uint64_t> mask_;
    std::string error_;
};

class ReasoningBudgetStage final : public SamplerStage {
  public:
    ReasoningBudgetStage(ReasoningBudgetParams p, std::shared_ptr<const grammar::TokenTrie> vocab)
        : params_(std::make_shared<const ReasoningBudgetParams>(std::move(p))),
          vocab_(std::move(vocab)),
          markers_{LazyTrigger{params_->start, true}, LazyTrigger{params_->end, false}},
          watch_(markers_) {
        restart();
    }
    const char* name() const override { return "reasoning-budget"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        if (phase_ != Phase::Forcing) return -1;
        const int32_t want = params_->close_tokens[forced_];
        c.c.erase(std::remove_if(c.c.begin(), c.c.end(),
                                 [&](const Candidate& x) { return x.id != want; }),
                  c.c.end());
        if (c.c.empty())
            error_ = "reasoning budget: the closing token " + std::to_string(want) +
                     " is not among the candidates";
        c.has_p = false;
        return -1;
    }
    void accept(int32_t token) override {
        switch (phase_) {
            case Phase::Forcing:
                if (++forced_ == params_->close_tokens.size()) phase_ = Phase::Done;
                return;
            case Phase::Done:
                return;
            case Phase::Outside:
                if (watch_.feed(piece_of(*vocab_, token), std::span(markers_).first(1))) open();
                return;
            case Phase::Inside:
                if (watch_.feed(piece_of(*vocab_, token), std::span(markers_).last(1))) {
                    phase_ = Phase::Done;  // closed by the model itself
                    return;
                }
                if (++used_ >= params_->budget) phase_ = Phase::Forcing;
                return;
        }
    }
    void restart() override {
        watch_.clear();
        error_.clear();
        phase_ = Phase::Outside;
        forced_ = 0;
        if (params_->starts_inside) open();
    }
    std::string error() const override { return error_; }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<ReasoningBudgetStage>(*this);
    }

  private:
    enum class Phase { Outside, Inside, Forcing, Done };
    void open() {
        used_ = 0;
        phase_ = params_->budget > 0 ? Phase::Inside : Phase::Forcing;
        if (params_->close_tokens.empty()) phase_ = Phase::Done;  // nothing to force
    }

    std::shared_ptr<const ReasoningBudgetParams> params_;
    std::shared_ptr<const grammar::TokenTrie> vocab_;
    std::vector<LazyTrigger> markers_;  // [0] the start (at the answer's start), [1] the end
    TextWatch watch_;
    Phase phase_ = Phase::Outside;
    int64_t used_ = 0;   // tokens generated inside the block
    size_t forced_ = 0;  // close tokens written
    std::string error_;
};

}  // namespace

std::unique_ptr<SamplerStage> lazy_grammar_stage(LazyGrammarParams params,
                                                 std::shared_ptr<const grammar::TokenTrie> vocab) {
    return std::make_unique<LazyGrammarStage>(std::move(params), std::move(vocab));
}

std::unique_ptr<SamplerStage> reasoning_budget_stage(
    ReasoningBudgetParams params, std::shared_ptr<const grammar::TokenTrie> vocab) {
    return std::make_unique<ReasoningBudgetStage>(std::move(params), std::move(vocab));
}

}  // namespace ferrox
