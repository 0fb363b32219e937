// A DecodeContext with no model, for the scheduler's tests. Cells are kept
// as model::Context keeps them: one cell per batch token, used by every
// sequence of its seq_ids; within a sequence the positions must follow on
// without gaps (else InvalidBatch); fewer free cells than tokens is NoRoom
// and changes nothing. A row's logits are seeded noise with one clear peak,
// at next_token(the tokens its sequence holds up to that row): so a sequence
// given the wrong cells answers differently, as it would with a real model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "decode_context.h"

namespace ferrox::test {

class FakeContext final : public server::DecodeContext {
  public:
    // Tokens below `first_text` are special (never predicted); the model
    // predicts one of [first_text, vocab).
    FakeContext(uint32_t n_ctx, uint32_t n_seq, uint32_t vocab, int32_t first_text)
        : n_ctx_(n_ctx), n_seq_(n_seq), vocab_(vocab), first_text_(first_text), cells_(n_ctx) {}

    // How many of the last tokens the next one depends on; 0: all of them. A
    // short memory makes the fake repeat itself, as n-gram speculation needs.
    size_t memory = 0;
    // > 0: as the CPU backend's products (server/prefill_plan.h), a cell
    // computed in a call of more rows than this differs from one computed in
    // a call of fewer, and the next token depends on that too -- so a
    // position computed on the other path than from scratch shows. The
    // answers then differ from continuation(); compare two schedulers.
    size_t few_rows = 0;

    // The token the fake model continues `history` with (FNV-1a of the ids).
    int32_t next_token(std::span<const int32_t> history) const {
        if (memory > 0 && history.size() > memory) history = history.last(memory);
        uint64_t h = 1469598103934665603ull;
        for (int32_t t : history) h = (h ^ uint32_t(t)) * 1099511628211ull;
        return first_text_ + int32_t(h % uint64_t(int32_t(vocab_) - first_text_));
    }
    // The `n` tokens a greedy run of `prompt` alone produces.
    std::vector<int32_t> continuation(std::vector<int32_t> history, size_t n) const {
        std::vector<int32_t> out;
        for (size_t i = 0; i < n; ++i) {
            out.push_back(next_token(history));
            history.push_back(out.back());
        }
        return out;
    }

    struct Row {
        int32_t seq, pos;
    };
    std::vector<std::vector<Row>> decodes;       // every decode call's rows, refused ones too
    std::optional<model::DecodeCode> fail_next;  // the next decode answers this

    size_t cells_of(int32_t seq) const {
        return size_t(std::count_if(cells_.begin(), cells_.end(),
                                    [&](const Cell& c) { return c.seqs.count(seq) > 0; }));
    }

    uint32_t context() const override { return n_ctx_; }
    uint32_t sequences() const override { return n_seq_; }
    uint32_t cells_used() const override {
        return uint32_t(std::count_if(cells_.begin(), cells_.end(),
                                      [](const Cell& c) { return !c.seqs.empty(); }));
    }

    model::DecodeStatus decode(const model::Batch& batch) override {
        std::vector<Row> rows;
        for (size_t i = 0; i < batch.size(); ++i)
            rows.push_back(
                {batch.seq_ids[i].empty() ? -1 : batch.seq_ids[i][0], batch.positions[i]});
        decodes.push_back(rows);
        if (auto bad = invalid(batch)) return {model::DecodeCode::InvalidBatch, *bad, 0, 0};
        if (fail_next) {
            const auto code = *fail_next;
            fail_next.reset();
            return {code, "injected by the test", 0, 0};
        }
        if (cells_free() < batch.size())
            return {model::DecodeCode::NoRoom, "no room", uint32_t(batch.size()), cells_free()};
        for (size_t i = 0; i < batch.size(); ++i) {
            Cell& c = *std::find_if(cells_.begin(), cells_.end(),
                                    [](const Cell& x) { return x.seqs.empty(); });
            c.token = batch.tokens[i];
            c.pos = batch.positions[i];
            c.seqs = std::set<int32_t>(batch.seq_ids[i].begin(), batch.seq_ids[i].end());
            c.panel = few_rows > 0 && batch.size() > few_rows;
        }
        logits_.assign(batch.size(), {});
        for (size_t i = 0; i < batch.size(); ++i)
            if (batch.logits[i]) logits_[i] = logits_for(batch.seq_ids[i][0], batch.positions[i]);
        return {};
    }
    std::span<const float> logits(uint32_t index) const override {
        return index < logits_.size() ? std::span<const float>(logits_[index])
                                      : std::span<const float>();
    }
    // Recurrent mode (a hybrid model such as qwen35): a sequence's tail is
    // not removed nor part of it copied (refused, as model::Context does);
    // checkpoints name a position and a hash of the tokens before it, and a
    // rewind to one checks the sequence still holds those tokens.
    bool recurrent = false;
    uint64_t checkpoint_size = 64;
    bool can_roll_back() const override { return !recurrent; }
    uint64_t checkpoint_bytes() const override { return recurrent ? checkpoint_size : 0; }
    std::vector<std::byte> checkpoint(int32_t seq) override {
        if (!recurrent) return {};
        const std::vector<int32_t> h = history(seq, std::numeric_limits<int32_t>::max());
        std::vector<std::byte> out(checkpoint_size);
        const auto pos = int32_t(h.size());
        const uint64_t hash = hash_of(h);
        std::memcpy(out.data(), &pos, sizeof pos);
        std::memcpy(out.data() + sizeof pos, &hash, sizeof hash);
        return out;
    }
    bool rewind(int32_t seq, std::span<const std::byte> bytes) override {
        if (!recurrent || bytes.size() != checkpoint_size) return false;
        int32_t pos = 0;
        uint64_t hash = 0;
        std::memcpy(&pos, bytes.data(), sizeof pos);
        std::memcpy(&hash, bytes.data() + sizeof pos, sizeof hash);
        const std::vector<int32_t> h = history(seq, pos - 1);
        if (int32_t(h.size()) != pos || hash_of(h) != hash) return false;
        for (Cell& c : cells_)
            if (c.pos >= pos) c.seqs.erase(seq);
        ++rewinds;
        return true;
    }
    size_t rewinds = 0;

    bool seq_remove(int32_t seq, int32_t p0, int32_t p1) override {
        if (seq < 0 || uint32_t(seq) >= n_seq_) return false;
        if (recurrent) {  // nothing, or the whole sequence
            const std::vector<int32_t> h = history(seq, std::numeric_limits<int32_t>::max());
            const bool nothing = p0 >= int32_t(h.size());
            if (!nothing && !(p0 <= 0 && p1 < 0)) return false;
        }
        for (Cell& c : cells_)
            if (c.pos >= p0 && (p1 < 0 || c.pos < p1)) c.seqs.erase(seq);
        return true;
    }
    bool seq_copy(int32_t src, int32_t dst, int32_t p0, int32_t p1) override {
        if (src < 0 || dst < 0 || uint32_t(src) >= n_seq_ || uint32_t(dst) >= n_seq_) return false;
        if (recurrent) {  // all of src's positions
            const auto n = int32_t(history(src, std::numeric_limits<int32_t>::max()).size());
            if (!(p0 <= 0 && (p1 < 0 || p1 >= n))) return false;
        }
        for (Cell& c : cells_)
            if (c.seqs.count(src) && c.pos >= p0 && (p1 < 0 || c.pos < p1)) c.seqs.insert(dst);
        return true;
    }

  private:
    struct Cell {
        int32_t token = 0, pos = -1;
        bool panel = false;      // computed in a call of more than few_rows rows
        std::set<int32_t> seqs;  // empty: free
    };

    int32_t next_pos(int32_t seq) const {
        int32_t last = -1;
        for (const Cell& c : cells_)
            if (c.seqs.count(seq)) last = std::max(last, c.pos);
        return last + 1;
    }
    std::optional<std::string> invalid(const model::Batch& batch) const {
        if (batch.size() == 0) return "an empty batch";
        std::map<int32_t, int32_t> next;
        for (size_t i = 0; i < batch.size(); ++i) {
            if (batch.tokens[i] < 0 || uint32_t(batch.tokens[i]) >= vocab_) return "a bad token";
            if (batch.seq_ids[i].empty()) return "a token of no sequence";
            for (int32_t s : batch.seq_ids[i])
                if (s < 0 || uint32_t(s) >= n_seq_) return "a bad sequence id";
            const int32_t s = batch.seq_ids[i][0];
            auto it = next.try_emplace(s, next_pos(s)).first;
            if (batch.positions[i] != it->second)
                return "position " + std::to_string(batch.positions[i]) + " of sequence " +
                       std::to_string(s) + " does not follow on " + std::to_string(it->second);
            ++it->second;
        }
        return std::nullopt;
    }
    // The tokens `seq` holds at positions up to `pos`, in position order.
    // With `paths`, a token computed on the panel path is told apart (its
    // id's top bit set).
    std::vector<int32_t> history(int32_t seq, int32_t pos, bool paths = false) const {
        std::vector<std::pair<int32_t, int32_t>> held;  // (pos, token)
        for (const Cell& c : cells_)
            if (c.seqs.count(seq) && c.pos <= pos)
                held.emplace_back(c.pos, paths && c.panel ? c.token | (1 << 30) : c.token);
        std::sort(held.begin(), held.end());
        std::vector<int32_t> out;
        for (const auto& [p, t] : held) out.push_back(t);
        return out;
    }
    static uint64_t hash_of(const std::vector<int32_t>& tokens) {
        uint64_t h = 1469598103934665603ull;
        for (int32_t t : tokens) h = (h ^ uint32_t(t)) * 1099511628211ull;
        return h;
    }
    // Runs after the batch's cells are placed: the row's sequence holds it.
    std::vector<float> logits_for(int32_t seq, int32_t pos) const {
        const std::vector<int32_t> history = this->history(seq, pos);
        const int32_t peak = next_token(few_rows > 0 ? this->history(seq, pos, true) : history);
        std::mt19937_64 rng(uint64_t(peak) * 7919u + history.size());
        std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
        std::vector<float> out(vocab_);
        for (float& v : out) v = noise(rng);
        out[size_t(peak)] = 8.0f;
        return out;
    }

    uint32_t n_ctx_, n_seq_, vocab_;
    int32_t first_text_;
    std::vector<Cell> cells_;
    std::vector<std::vector<float>> logits_;
};

}  // namespace ferrox::test
