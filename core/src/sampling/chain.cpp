#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ferrox/sampler_chain.h"
#include "ferrox/sampling.h"
#include "grammar_mask.h"

namespace ferrox {

namespace {

// Highest first; ties by id so the order (and the draw) is deterministic.
bool by_logit(const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

class LogitBias final : public SamplerStage {
  public:
    explicit LogitBias(std::vector<std::pair<int32_t, float>> bias)
        : bias_(std::move(bias)), by_id_(bias_) {
        std::stable_sort(by_id_.begin(), by_id_.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    const char* name() const override { return "logit-bias"; }
    // O(entries) while the candidates are in id order, O(n log entries)
    // otherwise: a request's bias must never cost entries x vocabulary per step,
    // since every sequence of a server step waits for it. Each candidate gets
    // its entries added in the order given, either way.
    int32_t apply(Candidates& c, SamplerState&) override {
        if (bias_.empty()) return -1;
        // Candidates start in id order (index == id) until a stage sorts them.
        const bool indexed = std::all_of(bias_.begin(), bias_.end(), [&](const auto& e) {
            return e.first >= 0 && static_cast<size_t>(e.first) < c.c.size() &&
                   c.c[static_cast<size_t>(e.first)].id == e.first;
        });
        if (indexed) {
            for (const auto& [id, b] : bias_) c.c[static_cast<size_t>(id)].logit += b;
        } else {
            for (auto& x : c.c) {
                auto it = std::lower_bound(by_id_.begin(), by_id_.end(), x.id,
                                           [](const auto& e, int32_t id) { return e.first < id; });
                for (; it != by_id_.end() && it->first == x.id; ++it) x.logit += it->second;
            }
        }
        c.sorted = c.has_p = false;
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<LogitBias>(*this);
    }

  private:
    std::vector<std::pair<int32_t, float>> bias_;
    std::vector<std::pair<int32_t, float>> by_id_;  // bias_, stably sorted by id
};

class Penalties final : public SamplerStage {
  public:
    Penalties(uint32_t last_n, float repeat, float frequency, float presence)
        : last_n_(last_n), repeat_(repeat), frequency_(frequency), presence_(presence) {}
    const char* name() const override { return "penalties"; }
    bool leaves_logits() const override {
        return last_n_ == 0 || (repeat_ == 1.0f && frequency_ == 0.0f && presence_ == 0.0f);
    }
    int32_t apply(Candidates& c, SamplerState& s) override {
        if (leaves_logits()) return -1;
        const size_t from = s.history.size() > last_n_ ? s.history.size() - last_n_ : 0;
        std::unordered_map<int32_t, uint32_t> count;
        for (size_t i = from; i < s.history.size(); ++i) ++count[s.history[i]];
        for (auto& x : c.c) {
            const auto it = count.find(x.id);
            if (it == count.end()) continue;
            if (repeat_ != 1.0f) x.logit = x.logit > 0 ? x.logit / repeat_ : x.logit * repeat_;
            x.logit -= static_cast<float>(it->second) * frequency_ + presence_;
        }
        c.sorted = c.has_p = false;
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<Penalties>(*this);
    }

  private:
    uint32_t last_n_;
    float repeat_, frequency_, presence_;
};

class TopK final : public SamplerStage {
  public:
    explicit TopK(uint32_t k) : k_(k) {}
    const char* name() const override { return "top-k"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        const size_t k = k_ ? std::min<size_t>(k_, c.c.size()) : c.c.size();
        if (!c.sorted) {
            std::partial_sort(c.c.begin(), c.c.begin() + static_cast<std::ptrdiff_t>(k), c.c.end(),
                              by_logit);
            c.sorted = true;
        }
        c.c.resize(k);
        c.has_p = false;
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override { return std::make_unique<TopK>(*this); }

  private:
    uint32_t k_;
};

class Temperature final : public SamplerStage {
  public:
    explicit Temperature(float t) : t_(t) {}
    const char* name() const override { return "temperature"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        // Dividing by a positive number keeps the order.
        for (auto& x : c.c) x.logit /= t_;
        c.has_p = false;
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<Temperature>(*this);
    }

  private:
    float t_;
};

class TopP final : public SamplerStage {
  public:
    explicit TopP(float p) : p_(p) {}
    const char* name() const override { return "top-p"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        if (!c.has_p) c.softmax();
        c.keep_top_p(p_);
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override { return std::make_unique<TopP>(*this); }

  private:
    float p_;
};

class MinP final : public SamplerStage {
  public:
    explicit MinP(float p) : p_(p) {}
    const char* name() const override { return "min-p"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        if (!c.has_p) c.softmax();
        c.keep_min_p(p_);
        return -1;
    }
    std::unique_ptr<SamplerStage> clone() const override { return std::make_unique<MinP>(*this); }

  private:
    float p_;
};

class Greedy final : public SamplerStage {
  public:
    const char* name() const override { return "greedy"; }
    bool terminal() const override { return true; }
    bool picks_highest() const override { return true; }
    int32_t apply(Candidates& c, SamplerState&) override {
        if (c.c.empty()) return -1;
        // The first of the highest (the lowest id on ties, as argmax()).
        const auto best = std::min_element(c.c.begin(), c.c.end(), by_logit);
        return best->id;
    }
    std::unique_ptr<SamplerStage> clone() const override { return std::make_unique<Greedy>(); }
};

class Distribution final : public SamplerStage {
  public:
    const char* name() const override { return "dist"; }
    bool terminal() const override { return true; }
    int32_t apply(Candidates& c, SamplerState& s) override {
        if (c.c.empty()) return -1;
        if (!c.has_p) c.softmax();
        double total = 0;
        for (const auto& x : c.c) total += static_cast<double>(x.p);
        double r = s.uniform() * total;
        for (const auto& x : c.c) {
            r -= static_cast<double>(x.p);
            if (r < 0) return x.id;
        }
        return c.c.back().id;
    }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<Distribution>();
    }
};

class GrammarStage final : public SamplerStage {
  public:
    GrammarStage(std::shared_ptr<const grammar::Grammar> g,
                 std::shared_ptr<const grammar::TokenTrie> vocab)
        : matcher_(std::move(g), std::move(vocab)) {}
    const char* name() const override { return "grammar"; }
    int32_t apply(Candidates& c, SamplerState&) override {
        sampling_detail::keep_grammar_allowed(matcher_, mask_, c, error_);
        return -1;
    }
    void accept(int32_t token) override {
        if (auto ok = matcher_.accept(token); !ok) error_ = ok.error().message();
    }
    void restart() override {
        matcher_.restart();
        error_.clear();
    }
    std::string error() const override { return error_; }
    const grammar::GrammarMatcher* grammar_matcher() const override { return &matcher_; }
    std::unique_ptr<SamplerStage> clone() const override {
        return std::make_unique<GrammarStage>(*this);
    }

  private:
    grammar::GrammarMatcher matcher_;
    std::vector<uint64_t> mask_;
    std::string error_;
};

}  // namespace

void Candidates::sort() {
    if (sorted) return;
    std::sort(c.begin(), c.end(), by_logit);
    sorted = true;
}

void Candidates::softmax() {
    sort();
    has_p = true;
    if (c.empty()) return;
    const float max = c.front().logit;
    double sum = 0;
    for (auto& x : c) sum += static_cast<double>(x.p = std::exp(x.logit - max));
    for (auto& x : c) x.p = static_cast<float>(static_cast<double>(x.p) / sum);
}

void Candidates::keep_top_p(float p) {
    if (p >= 1.0f) return;
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        cum += static_cast<double>(c[i].p);
        if (cum >= static_cast<double>(p)) {
            c.resize(i + 1);
            return;
        }
    }
}

void Candidates::keep_min_p(float min_p) {
    if (min_p <= 0.0f || c.empty()) return;
    const float floor = min_p * c.front().p;
    size_t keep = 1;
    while (keep < c.size() && c[keep].p >= floor) ++keep;
    c.resize(keep);
}

double SamplerState::uniform() { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::unique_ptr<SamplerStage> logit_bias_stage(std::vector<std::pair<int32_t, float>> bias) {
    return std::make_unique<LogitBias>(std::move(bias));
}
std::unique_ptr<SamplerStage> penalties_stage(uint32_t last_n, float repeat, float frequency,
                                              float presence) {
    return std::make_unique<Penalties>(last_n, repeat, frequency, presence);
}
std::unique_ptr<SamplerStage> top_k_stage(uint32_t k) { return std::make_unique<TopK>(k); }
std::unique_ptr<SamplerStage> temperature_stage(float t) {
    return std::make_unique<Temperature>(t);
}
std::unique_ptr<SamplerStage> top_p_stage(float p) { return std::make_unique<TopP>(p); }
std::unique_ptr<SamplerStage> min_p_stage(float min_p) { return std::make_unique<MinP>(min_p); }
std::unique_ptr<SamplerStage> greedy_stage() { return std::make_unique<Greedy>(); }
std::unique_ptr<SamplerStage> distribution_stage() { return std::make_unique<Distribution>(); }
std::unique_ptr<SamplerStage> grammar_stage(std::shared_ptr<const grammar::Grammar> grammar,
                                            std::shared_ptr<const grammar::TokenTrie> vocab) {
    return std::make_unique<GrammarStage>(std::move(grammar), std::move(vocab));
}

SamplerChain::SamplerChain(uint64_t seed) { state_.rng.seed(seed); }

SamplerChain::SamplerChain(const SamplerChain& other) : state_(other.state_) {
    for (const auto& s : other.stages_) stages_.push_back(s->clone());
}

SamplerChain& SamplerChain::operator=(const SamplerChain& other) {
    if (this == &other) return *this;
    SamplerChain copy(other);
    *this = std::move(copy);
    return *this;
}

SamplerChain SamplerChain::from_params(const ChainParams& params) {
    const SamplerParams& p = params.base;
    SamplerChain chain(p.seed);
    if (params.reasoning_budget.budget >= 0 && params.grammar_vocab)
        chain.add(reasoning_budget_stage(params.reasoning_budget, params.grammar_vocab));
    if (params.grammar && params.grammar_vocab)
        chain.add(grammar_stage(params.grammar, params.grammar_vocab));
    if (params.lazy.grammar && params.grammar_vocab)
        chain.add(lazy_grammar_stage(params.lazy, params.grammar_vocab));
    if (!params.logit_bias.empty()) chain.add(logit_bias_stage(params.logit_bias));
    chain.add(penalties_stage(p.repeat_last_n, p.repeat_penalty, params.frequency_penalty,
                              params.presence_penalty));
    if (p.temperature <= 0.0f) {
        chain.add(greedy_stage());
        return chain;
    }
    // top_k 0 sorts every candidate (the draw walks them in that order).
    chain.add(top_k_stage(p.top_k));
    chain.add(temperature_stage(p.temperature));
    chain.add(top_p_stage(p.top_p));
    chain.add(min_p_stage(p.min_p));
    chain.add(distribution_stage());
    return chain;
}

SamplerChain& SamplerChain::add(std::unique_ptr<SamplerStage> stage) {
    stages_.push_back(std::move(stage));
    return *this;
}

void SamplerChain::accept(int32_t token) {
    state_.history.push_back(token);
    for (const auto& stage : stages_) stage->accept(token);
}

void SamplerChain::accept(std::span<const int32_t> tokens) {
    state_.history.insert(state_.history.end(), tokens.begin(), tokens.end());
}

void SamplerChain::clear_history() {
    state_.history.clear();
    for (const auto& stage : stages_) stage->restart();
}

std::string SamplerChain::error() const {
    for (const auto& stage : stages_)
        if (auto e = stage->error(); !e.empty()) return e;
    return {};
}

const grammar::GrammarMatcher* SamplerChain::grammar_matcher() const {
    for (const auto& stage : stages_)
        if (const auto* m = stage->grammar_matcher()) return m;
    return nullptr;
}

bool SamplerChain::argmax_of_logits() const {
    for (const auto& stage : stages_) {
        if (stage->leaves_logits()) continue;
        return stage->picks_highest();
    }
    return true;  // no terminal stage: greedy
}

int32_t SamplerChain::sample(std::span<const float> logits) {
    // Greedy after stages that change nothing: the logits' own argmax, without
    // copying each logit into a candidate first (a server's 16 sequences over
    // Gemma's 262,144 logits spent 14% of its CPU there, perf).
    if (!logits.empty() && argmax_of_logits()) return argmax(logits);
    work_.c.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        work_.c[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
    work_.sorted = work_.has_p = false;
    for (const auto& stage : stages_) {
        const int32_t picked = stage->apply(work_, state_);
        if (stage->terminal()) return picked;
    }
    Greedy greedy;
    return greedy.apply(work_, state_);
}

SamplerChain SamplerChain::clone_for(uint64_t seed) const {
    SamplerChain copy(*this);
    copy.reset(seed);
    return copy;
}

void SamplerChain::reset(uint64_t seed) {
    state_.history.clear();
    for (const auto& stage : stages_) stage->restart();
    state_.rng.seed(seed);
}

}  // namespace ferrox
