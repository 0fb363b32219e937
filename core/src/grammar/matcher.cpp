#include "ferrox/grammar/matcher.h"

#include <algorithm>

namespace ferrox::grammar {

namespace {

constexpr size_t kCacheEntries = 16;
// Interned states kept at most (each ~1 KiB of transitions); past it the
// table is emptied before the next walk, and a walk that fills it goes on
// without it.
constexpr size_t kMaxStates = 4096;
constexpr size_t kStateBuckets = 8192;
constexpr int32_t kUnknown = -3, kDead = -1, kFull = -2;

uint64_t hash_stack(std::span<const uint32_t> stack) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t x : stack) h = (h ^ x) * 0x100000001b3ull;
    return h ^ stack.size();
}

void set_bit(std::vector<uint64_t>& bits, int32_t id) {
    bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (static_cast<unsigned>(id) & 63);
}

// The smallest code point a sequence of `length` bytes may encode (RFC 3629).
uint32_t shortest_form_floor(uint8_t length) {
    return length == 2 ? 0x80 : length == 3 ? 0x800 : length == 4 ? 0x10000 : 0;
}

bool well_formed(uint32_t cp, uint8_t length) {
    return cp >= shortest_form_floor(length) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}

// The code points a partial sequence can still become; lo > hi when none
// (as llama.cpp: an overlong start -- C0, C1, E0 80, F0 80 -- can become no
// character, so that byte tokens cannot spell ASCII the long way). `strict`
// also rules out every other overlong form and whatever lies past U+10FFFF.
std::pair<uint32_t, uint32_t> partial_range(PartialChar p, bool strict) {
    if (p.need == 1 && p.value < 2) return {1, 0};
    const unsigned shift = 6u * p.need;
    uint32_t lo = p.value << shift;
    uint32_t hi = lo | ((1u << shift) - 1);
    if (lo == 0) lo = p.need == 2 ? 0x800 : p.need == 3 ? 0x10000 : lo;
    if (strict) {
        lo = std::max(lo, shortest_form_floor(p.length));
        hi = std::min<uint32_t>(hi, 0x10FFFF);
    }
    return {lo, hi};
}

}  // namespace

bool StackSet::insert(std::span<const uint32_t> stack, size_t max) {
    const uint64_t h = hash_stack(stack);
    for (size_t i = 0; i < hashes.size(); ++i)
        if (hashes[i] == h && std::equal(stack.begin(), stack.end(), at(i).begin(), at(i).end()))
            return true;
    if (size() >= max) return false;
    flat.insert(flat.end(), stack.begin(), stack.end());
    bounds.push_back(static_cast<uint32_t>(flat.size()));
    hashes.push_back(h);
    return true;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenTrie> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
    levels_.resize(vocab_->max_depth() + 2);
    restart();
}

void GrammarMatcher::restart() {
    stacks_.clear();
    partial_ = {};
    finished_ = false;
    error_.clear();
    steps_ = 0;
    // The root's alternatives, each expanded to characters on top.
    for (uint32_t alt : grammar_->alternatives[grammar_->root]) {
        next_.clear();
        if (grammar_->symbols[alt].kind != Symbol::Kind::End) next_.push_back(alt);
        if (expand(next_, stacks_) == Step::Overflow) {
            error_ = fmt::format(
                "grammar: the start expands past the limit max_stacks ({}), max_stack_depth "
                "({}) or max_expansions ({})",
                grammar_->limits.max_stacks, grammar_->limits.max_stack_depth,
                grammar_->limits.max_expansions);
            return;
        }
    }
}

// Replaces rule references on top of `stack` by their alternatives until
// every resulting stack has a character set on top (or is empty: a parse
// ends), adding each to `out`. Terminates: the parser refused left recursion.
GrammarMatcher::Step GrammarMatcher::expand(const std::vector<uint32_t>& stack, StackSet& out) {
    const Grammar& g = *grammar_;
    const GrammarLimits& lim = g.limits;
    size_t n_work = 0;
    auto push_work = [&](auto&& s) -> std::vector<uint32_t>& {
        if (work_.size() <= n_work) work_.emplace_back();
        auto& slot = work_[n_work++];
        slot.assign(s.begin(), s.end());
        return slot;
    };
    push_work(stack);
    std::vector<uint32_t>& cur = cur_;
    while (n_work > 0) {
        --n_work;
        cur.assign(work_[n_work].begin(), work_[n_work].end());
        if (++steps_ > lim.max_expansions || cur.size() > lim.max_stack_depth)
            return Step::Overflow;
        if (cur.empty() || g.symbols[cur.back()].kind == Symbol::Kind::Chars) {
            if (!out.insert(cur, lim.max_stacks)) return Step::Overflow;
            continue;
        }
        const uint32_t top = cur.back();
        cur.pop_back();
        if (g.symbols[top + 1].kind != Symbol::Kind::End) cur.push_back(top + 1);
        const auto& alts = g.alternatives[g.symbols[top].index];
        // Pushed in reverse so that the first alternative is expanded first.
        for (size_t i = alts.size(); i-- > 0;) {
            auto& next = push_work(cur);
            if (g.symbols[alts[i]].kind != Symbol::Kind::End) next.push_back(alts[i]);
        }
    }
    return Step::Ok;
}

GrammarMatcher::Step GrammarMatcher::advance_char(const StackSet& in, uint32_t cp, StackSet& out) {
    const Grammar& g = *grammar_;
    out.clear();
    steps_ = 0;
    for (size_t i = 0; i < in.size(); ++i) {
        const auto s = in.at(i);
        if (s.empty()) continue;
        const uint32_t top = s.back();
        if (!g.charsets[g.symbols[top].index].contains(cp)) continue;
        next_.assign(s.begin(), s.end() - 1);
        if (g.symbols[top + 1].kind != Symbol::Kind::End) next_.push_back(top + 1);
        if (expand(next_, out) == Step::Overflow) return Step::Overflow;
    }
    return Step::Ok;
}

GrammarMatcher::Step GrammarMatcher::advance_byte(const StackSet& in, PartialChar p, uint8_t byte,
                                                  StackSet& out, PartialChar& out_p) {
    out_p = {};
    if (p.need == 0) {
        if (byte < 0x80) return advance_char(in, byte, out);
        // As llama.cpp decodes: 0xF8..0xFF lead four bytes too (their code
        // points lie past U+10FFFF, where only negated classes and '.' match).
        const uint8_t len = (byte >> 5) == 0x6   ? 2
                            : (byte >> 4) == 0xE ? 3
                            : (byte >> 4) == 0xF ? 4
                                                 : 0;
        if (len == 0) {  // a continuation byte where a code point must start
            out.clear();
            return Step::Ok;
        }
        // llama.cpp's mask, (1 << (8 - len)) - 1: the lead's low bits after
        // its length prefix. (0x7F >> len kept 3 bits of F8..FF, so F8 9F BF BF
        // read as U+1FFFF and passed JSON string classes as a valid character.)
        out_p = {static_cast<uint32_t>(byte & ((1u << (8 - len)) - 1)),
                 static_cast<uint8_t>(len - 1), len};
    } else {
        if ((byte & 0xC0) != 0x80) {
            out.clear();
            return Step::Ok;
        }
        out_p = {(p.value << 6) | (byte & 0x3Fu), static_cast<uint8_t>(p.need - 1), p.length};
        if (out_p.need == 0) {
            const uint32_t cp = out_p.value;
            const uint8_t length = out_p.length;
            out_p = {};
            if (grammar_->limits.strict_utf8 && !well_formed(cp, length)) {
                out.clear();
                return Step::Ok;
            }
            return advance_char(in, cp, out);
        }
    }
    // Unfinished: the stacks stay as they are while some top could still take
    // the character (llama.cpp checks each partial sequence afresh against all
    // stacks, and so must we, or F0 83 .. would lose the stacks F0 alone rules out).
    const auto [lo, hi] = partial_range(out_p, grammar_->limits.strict_utf8);
    const Grammar& g = *grammar_;
    out.clear();
    if (lo > hi) return Step::Ok;
    for (size_t i = 0; i < in.size(); ++i) {
        const auto s = in.at(i);
        if (!s.empty() && g.charsets[g.symbols[s.back()].index].intersects(lo, hi)) {
            out = in;
            break;
        }
    }
    return Step::Ok;
}

void GrammarMatcher::walk(uint32_t node, size_t depth, const StackSet& set, PartialChar p,
                          std::vector<uint64_t>& mask) {
    const TokenTrie& t = *vocab_;
    const TokenTrie::Node& n = t.node(node);
    StackSet& next = levels_[depth + 1];
    for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
        const TokenTrie::Node& child = t.node(c);
        PartialChar np;
        // A path past a bound is a token the grammar cannot take: bounded work, no error.
        if (advance_byte(set, p, child.byte, next, np) == Step::Overflow || next.empty()) continue;
        for (uint32_t k = child.first_token; k < child.first_token + child.n_tokens; ++k)
            set_bit(mask, t.token_at(k));
        if (child.n_children) walk(c, depth + 1, next, np, mask);
    }
}

int32_t GrammarMatcher::intern(const StackSet& stacks, PartialChar partial) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t{partial.value} << 16) ^
                 (uint64_t{partial.length} << 8) ^ partial.need;
    for (uint64_t x : stacks.hashes) h = (h ^ x) * 0x100000001b3ull;
    auto& bucket = state_buckets_[h % kStateBuckets];
    for (int32_t id : bucket) {
        const State& st = states_[static_cast<size_t>(id)];
        if (st.hash == h && st.partial == partial && st.stacks == stacks) return id;
    }
    if (states_.size() >= kMaxStates) return kFull;
    State& st = states_.emplace_back();
    st.stacks = stacks;
    st.partial = partial;
    st.hash = h;
    st.next.assign(256, kUnknown);
    const auto id = static_cast<int32_t>(states_.size() - 1);
    bucket.push_back(id);
    return id;
}

int32_t GrammarMatcher::step_state(int32_t state, uint8_t byte) {
    const int32_t known = states_[static_cast<size_t>(state)].next[byte];
    if (known != kUnknown) return known;
    PartialChar np;
    // A copy: interning may grow states_ and move the one read from.
    const State& from = states_[static_cast<size_t>(state)];
    int32_t to = kDead;
    if (advance_byte(from.stacks, from.partial, byte, swap_, np) == Step::Ok && !swap_.empty())
        to = intern(swap_, np);
    if (to == kFull) return kFull;
    states_[static_cast<size_t>(state)].next[byte] = to;
    return to;
}

void GrammarMatcher::walk_states(uint32_t node, size_t depth, int32_t state,
                                 std::vector<uint64_t>& mask) {
    const TokenTrie& t = *vocab_;
    const TokenTrie::Node& n = t.node(node);
    for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
        const TokenTrie::Node& child = t.node(c);
        const int32_t to = step_state(state, child.byte);
        if (to == kDead) continue;
        if (to == kFull) {  // the rest of this subtree without the table
            StackSet& next = levels_[depth + 1];
            PartialChar np;
            const State& from = states_[static_cast<size_t>(state)];
            if (advance_byte(from.stacks, from.partial, child.byte, next, np) == Step::Overflow ||
                next.empty())
                continue;
            for (uint32_t k = child.first_token; k < child.first_token + child.n_tokens; ++k)
                set_bit(mask, t.token_at(k));
            if (child.n_children) walk(c, depth + 1, next, np, mask);
            continue;
        }
        for (uint32_t k = child.first_token; k < child.first_token + child.n_tokens; ++k)
            set_bit(mask, t.token_at(k));
        if (child.n_children) walk_states(c, depth + 1, to, mask);
    }
}

bool GrammarMatcher::complete() const {
    if (partial_.need) return false;
    for (size_t i = 0; i < stacks_.size(); ++i)
        if (stacks_.at(i).empty()) return true;
    return false;
}

Expected<void> GrammarMatcher::allowed(std::vector<uint64_t>& mask) {
    if (!error_.empty()) return Error(error_);
    const size_t words = (vocab_->vocab_size() + 63) / 64;
    mask.assign(words, 0);
    if (finished_) return {};
    ++clock_;
    for (CacheEntry& e : cache_)
        if (e.partial == partial_ && e.stacks == stacks_) {
            e.used = clock_;
            mask = e.mask;
            return {};
        }
    if (states_.size() >= kMaxStates) {
        states_.clear();
        for (auto& b : state_buckets_) b.clear();
    }
    if (state_buckets_.empty()) state_buckets_.resize(kStateBuckets);
    const int32_t start = intern(stacks_, partial_);
    if (start >= 0)
        walk_states(0, 0, start, mask);
    else
        walk(0, 0, stacks_, partial_, mask);
    if (complete())
        for (int32_t id : vocab_->eog_tokens()) set_bit(mask, id);
    CacheEntry* slot = nullptr;
    if (cache_.size() < kCacheEntries) {
        slot = &cache_.emplace_back();
    } else {
        slot = &*std::min_element(cache_.begin(), cache_.end(),
                                  [](const auto& a, const auto& b) { return a.used < b.used; });
    }
    slot->stacks = stacks_;
    slot->partial = partial_;
    slot->mask = mask;
    slot->used = clock_;
    return {};
}

Expected<void> GrammarMatcher::accept_bytes(std::string_view bytes) {
    if (!error_.empty()) return Error(error_);
    for (size_t i = 0; i < bytes.size(); ++i) {
        PartialChar np;
        const Step step =
            advance_byte(stacks_, partial_, static_cast<uint8_t>(bytes[i]), swap_, np);
        if (step == Step::Overflow) {
            error_ = fmt::format(
                "grammar: byte {} of the text passes the limit max_stacks ({}), "
                "max_stack_depth ({}) or max_expansions ({})",
                i, grammar_->limits.max_stacks, grammar_->limits.max_stack_depth,
                grammar_->limits.max_expansions);
            return Error(error_);
        }
        if (swap_.empty()) {
            error_ = fmt::format("grammar: byte {} (0x{:02X}) cannot continue the grammar", i,
                                 static_cast<uint8_t>(bytes[i]));
            return Error(error_);
        }
        std::swap(stacks_, swap_);
        partial_ = np;
    }
    return {};
}

Expected<void> GrammarMatcher::accept(int32_t token) {
    if (!error_.empty()) return Error(error_);
    if (finished_) {
        error_ = fmt::format("grammar: token {} after the end of generation", token);
        return Error(error_);
    }
    if (token < 0 || static_cast<size_t>(token) >= vocab_->vocab_size()) {
        error_ = fmt::format("grammar: token {} is outside the vocabulary ({})", token,
                             vocab_->vocab_size());
        return Error(error_);
    }
    if (vocab_->end_of_generation(token)) {
        if (!complete()) {
            error_ = fmt::format(
                "grammar: end-of-generation token {} before the grammar is complete", token);
            return Error(error_);
        }
        finished_ = true;
        return {};
    }
    const std::string& piece = vocab_->piece(token);
    if (piece.empty()) {
        error_ = fmt::format("grammar: token {} has no text to match", token);
        return Error(error_);
    }
    if (auto ok = accept_bytes(piece); !ok) {
        error_ = fmt::format("token {}: {}", token, error_);
        return Error(error_);
    }
    return {};
}

}  // namespace ferrox::grammar
