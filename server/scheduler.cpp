#include "scheduler.h"

#include <algorithm>

#include "ferrox/draft_source.h"
#include "ferrox/log.h"
#include "ferrox/ngram_draft.h"
#include "ferrox/sampler_chain.h"

namespace ferrox::server {

std::optional<Event> Job::next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
}

void Job::push(Event e) {
    {
        std::lock_guard lock(m_);
        if (e.kind == Event::Kind::Done) finished_at = Clock::now();
        events_.push_back(std::move(e));
    }
    cv_.notify_one();
}

struct Scheduler::Slot {
    int32_t seq = 0;
    std::shared_ptr<Job> job;
    std::vector<int32_t> cached;  // the tokens in this sequence's cells, position 0 on
    std::string scope;            // the cache_scope of the request that computed them
    bool generating = false;      // the prompt is in; next_token waits to be decoded
    int32_t next_token = -1;
    int batch_index = -1;
    uint32_t generated = 0, reused = 0;
    uint64_t last_use = 0;
    uint64_t admitted = 0;  // admission order: prompts are prefilled oldest first
    size_t canonical = 0;   // leading cached positions, to a chunk end, computed as from scratch
    SamplerChain chain;
    std::optional<output::SequenceOutput> output;  // the job's text, stop strings, logprobs
    Clock::time_point last_token_at;
    // Speculation (docs/speculation.md): where drafts come from (prompt
    // lookup, or the draft model's sequence of this slot's id), the most
    // draft tokens this request verifies per step, how many it proposes next
    // (adapted to its acceptance), this step's draft, and the totals for its
    // usage.
    std::unique_ptr<DraftSource> source = std::make_unique<NgramDraftSource>();
    ModelDraftSource* model_source = nullptr;  // `source`, when the draft model's
    uint32_t draft_max = 0, draft_len = 0;
    std::vector<int32_t> draft;
    uint32_t drafted = 0, accepted = 0;
};

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

output::OutputOptions output_options(const GenerationRequest& r) {
    output::OutputOptions o;
    o.stop = r.stop;
    o.max_tokens = r.max_tokens;
    o.logprobs = r.logprobs;
    o.top_logprobs = r.top_logprobs;
    return o;
}

// A Done event: the job ended, for `why`.
Event ended(FinishReason why, std::string detail) {
    Event e;
    e.kind = Event::Kind::Done;
    e.finish = why;
    e.why = std::move(detail);
    return e;
}

}  // namespace

Scheduler::Scheduler(const Tokenizer& tokenizer, std::unique_ptr<DecodeContext> context,
                     SchedulerOptions options, Metrics& metrics)
    : tok_(tokenizer),
      ctx_(std::move(context)),
      options_(options),
      metrics_(metrics),
      gauges_(options.gauges ? *options.gauges : metrics),
      n_ctx_(ctx_->context()) {
    options_.sequences = std::min(options_.sequences, ctx_->sequences());
    slots_.resize(options_.sequences);
    for (uint32_t i = 0; i < options_.sequences; ++i) slots_[i].seq = static_cast<int32_t>(i);
    gauges_.kv_total = n_ctx_;
    const uint64_t each = ctx_->checkpoint_bytes();
    if (each > 0 && options_.checkpoint_memory > 0) {
        checkpoints_ = std::make_unique<StateCheckpoints>(options_.checkpoint_memory, each);
        logger().info(
            "server: recurrent-state checkpoints of {} bytes at every {}-token chunk end and "
            "prompt end, {} bytes for all (server.checkpoint_memory): a prompt that extends a "
            "cached one resumes from the last usable checkpoint inside it",
            each, options_.prefill_chunk, options_.checkpoint_memory);
    } else if (each > 0) {
        logger().info(
            "server: no recurrent-state checkpoints (server.checkpoint_memory 0): every prompt is "
            "computed from its first token");
    }
}

void Scheduler::use_draft_model(std::unique_ptr<DecodeContext> draft) {
    if (draft->sequences() < options_.sequences || !draft->can_roll_back()) {
        logger().error(
            "server: the draft model's context has {} sequences{} for {} slots; drafts stay "
            "prompt lookups",
            draft->sequences(), draft->can_roll_back() ? "" : " and cannot roll back",
            options_.sequences);
        return;
    }
    // The draft computes a prompt in the target's prefill chunks.
    drafter_ = std::make_unique<ContextDrafter>(std::move(draft), options_.prefill_chunk,
                                                uint32_t(kDecodeRowsPerCall));
    for (Slot& s : slots_) {
        auto source = std::make_unique<ModelDraftSource>(*drafter_, s.seq);
        s.model_source = source.get();
        s.source = std::move(source);
    }
}

void Scheduler::start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
    stop();
    metrics_.checkpoint_bytes -= published_checkpoint_bytes_;
}

Scheduler::Submitted Scheduler::submit(GenerationRequest request) {
    std::lock_guard lock(m_);
    if (draining_ || stopping_) return {nullptr, Refusal::Draining, "the server is shutting down"};
    if (request.prompt.empty()) return {nullptr, Refusal::TooLong, "the prompt has no tokens"};
    if (request.prompt.size() + request.max_tokens > n_ctx_)
        return {nullptr, Refusal::TooLong,
                fmt::format("{} prompt tokens + max_tokens {} exceed the context's {} cells",
                            request.prompt.size(), request.max_tokens, n_ctx_)};
    // A request for a free slot waits only until the loop admits it; the
    // queue (max_queue, 0 = none) is what waits beyond the free slots.
    const size_t free_slots = options_.sequences - std::min<size_t>(running_, options_.sequences);
    if (waiting_.size() >= options_.max_queue + free_slots)
        return {nullptr, Refusal::QueueFull,
                fmt::format("{} requests are waiting for {} free sequences (server.max_queue {})",
                            waiting_.size(), free_slots, options_.max_queue)};
    auto job = std::make_shared<Job>(std::move(request));
    waiting_.push_back(job);
    gauges_.waiting = static_cast<int64_t>(waiting_.size());
    wake_.notify_one();
    return {job, Refusal::None, {}};
}

void Scheduler::begin_drain() {
    std::lock_guard lock(m_);
    draining_ = true;
}

bool Scheduler::wait_idle(Clock::time_point deadline) {
    std::unique_lock lock(m_);
    return idle_.wait_until(lock, deadline, [&] { return running_ == 0 && waiting_.empty(); });
}

void Scheduler::stop() {
    {
        std::lock_guard lock(m_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    // No step runs now: whatever is still running or waiting ends here.
    for (Slot& s : slots_)
        if (s.job)
            finish(s, FinishReason::Shutdown, "the server stopped before the answer was done",
                   false);
    std::unique_lock lock(m_);
    for (auto& job : waiting_)
        job->push(ended(FinishReason::Shutdown, "the server stopped before the request was taken"));
    waiting_.clear();
    gauges_.waiting = 0;
    idle_.notify_all();
}

void Scheduler::loop() {
    for (;;) {
        {
            std::lock_guard lock(m_);
            if (stopping_) break;
        }
        if (step()) continue;
        std::unique_lock lock(m_);
        wake_.wait_for(lock, std::chrono::milliseconds(100),
                       [&] { return stopping_ || !waiting_.empty(); });
    }
}

bool Scheduler::step() {
    {
        std::unique_lock lock(m_);
        admit(lock);
    }
    return advance();
}

// Moves waiting jobs into free slots. Called with m_ held; the context is
// touched only by this thread.
void Scheduler::admit(std::unique_lock<std::mutex>&) {
    while (!waiting_.empty()) {
        auto free_slot =
            std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.job; });
        if (free_slot == slots_.end()) break;
        std::shared_ptr<Job> job = waiting_.front();
        waiting_.pop_front();
        if (job->cancelled()) continue;
        if (Clock::now() > job->request.deadline) {
            job->push(ended(FinishReason::Timeout,
                            "server.request_timeout passed while the request waited"));
            continue;
        }
        const std::vector<int32_t>& prompt = job->request.prompt;
        // The slot whose cells share the longest prefix with the prompt; at
        // least the prompt's last token is computed, for its logits.
        // Only whole prefill chunks are shared (see prefill_step), and the
        // prompt's last token is always computed, for its logits.
        const size_t chunk = options_.prefill_chunk;
        const size_t most = (prompt.size() - 1) / chunk * chunk;
        const PrefillShape shape = prefill_shape();
        const auto exact = [&](size_t at) {
            return prefill_call_end(at, prompt.size(), shape) > 0;
        };
        Slot* best = nullptr;
        size_t reuse = 0;
        const StateCheckpoints::Entry* resume = nullptr;  // the state `reuse` starts from
        for (Slot& s : slots_) {
            if (s.scope != job->request.cache_scope) continue;
            size_t l =
                std::min({common_prefix(s.cached, prompt), s.canonical, most}) / chunk * chunk;
            const StateCheckpoints::Entry* from = nullptr;
            if (!ctx_->can_roll_back() && l < s.cached.size()) {
                // A recurrent state went past l: only a checkpoint inside the
                // shared prefix takes it back -- one at a chunk end, or at an
                // earlier prompt's end where resuming computes the rest exactly.
                const size_t limit = std::min(common_prefix(s.cached, prompt), prompt.size() - 1);
                from = checkpoints_ ? checkpoints_->find(s.seq, prompt, limit, exact) : nullptr;
                l = from ? from->tokens.size() : 0;
            }
            if (l > reuse) reuse = l, best = &s, resume = from;
        }
        Slot* target = nullptr;
        if (best && !best->job && reuse > 0) {
            target = best;
        } else {
            for (Slot& s : slots_)
                if (!s.job && (!target || s.last_use < target->last_use)) target = &s;
        }
        std::shared_ptr<const std::vector<std::byte>> state;
        if (resume) {
            state = resume->state;
            checkpoints_->touch(resume);
            ++metrics_.checkpoint_resumes;
        }
        bool ok = true;
        if (target != best && reuse > 0) {
            forget_checkpoints(*target, 0);
            // With a checkpoint: the whole sequence shared, then rewound to it.
            ok = ctx_->seq_remove(target->seq, 0, -1) &&
                 (state ? ctx_->seq_copy(best->seq, target->seq, 0, -1) &&
                              ctx_->rewind(target->seq, *state)
                        : ctx_->seq_copy(best->seq, target->seq, 0, static_cast<int32_t>(reuse)));
            target->cached.assign(prompt.begin(), prompt.begin() + static_cast<long>(reuse));
            if (ok && checkpoints_) checkpoints_->share(best->seq, target->seq, reuse);
        } else {
            ok = state ? ctx_->rewind(target->seq, *state)
                       : ctx_->seq_remove(target->seq, static_cast<int32_t>(reuse), -1);
            target->cached.resize(reuse);
        }
        target->canonical = reuse;
        if (!ok) {  // cannot happen with valid ids; start the slot empty rather than wrong
            (void)ctx_->seq_remove(target->seq, 0, -1);
            target->cached.clear();
            target->canonical = 0;
        }
        forget_checkpoints(*target, target->cached.size());
        Slot& s = *target;
        s.scope = job->request.cache_scope;
        s.job = job;
        s.admitted = ++admit_clock_;
        job->admitted_at = Clock::now();
        s.generating = false;
        s.next_token = -1;
        s.generated = 0;
        s.reused = static_cast<uint32_t>(s.cached.size());
        s.draft_max = ctx_->can_roll_back()
                          ? std::min(job->request.draft_max.value_or(options_.draft_max), kMaxDraft)
                          : 0;
        s.draft_len = s.draft_max;
        s.draft.clear();
        s.drafted = s.accepted = 0;
        s.chain = SamplerChain::from_params(job->request.sampling);
        s.chain.accept(prompt);
        s.output.emplace(tok_, output_options(job->request));
        ++running_;
        metrics_.prompt_tokens += prompt.size();
        if (s.reused > 0) {
            ++metrics_.prefix_hits;
            metrics_.prefix_tokens += s.reused;
        }
    }
    gauges_.waiting = static_cast<int64_t>(waiting_.size());
    gauges_.running = static_cast<int64_t>(running_);
    idle_.notify_all();  // dropped waiters may have left nothing to wait for
}

void Scheduler::finish(Slot& slot, FinishReason why, std::string detail, bool keep_cells) {
    Event done = ended(why, std::move(detail));
    done.prompt_tokens = static_cast<uint32_t>(slot.job->request.prompt.size());
    done.completion_tokens = slot.generated;
    done.cached_tokens = slot.reused;
    done.drafted_tokens = slot.drafted;
    done.accepted_tokens = slot.accepted;
    if (why == FinishReason::StopString && slot.output)
        done.stop_string = slot.output->stop_matched();
    if (output::is_complete(why))
        metrics_.e2e.observe(seconds(Clock::now() - slot.job->request.arrival));
    if (!keep_cells) {
        (void)ctx_->seq_remove(slot.seq, 0, -1);
        slot.source->forget();
        slot.cached.clear();
        slot.canonical = 0;
        forget_checkpoints(slot, 0);
    }
    const std::shared_ptr<Job> job = std::move(slot.job);
    slot.job.reset();
    slot.generating = false;
    slot.last_use = ++use_clock_;
    {
        std::lock_guard lock(m_);
        --running_;
        gauges_.running = static_cast<int64_t>(running_);
    }
    // Last: a client that has read its answer finds the gauges already without it.
    job->push(std::move(done));
    idle_.notify_all();
}

void Scheduler::sample_slot(Slot& slot, std::span<const float> logits) {
    const int32_t token = slot.chain.sample(logits);
    if (token < 0) {  // a grammar stage left no candidate (its error says why)
        finish(slot, FinishReason::Failed, slot.chain.error(), false);
        return;
    }
    slot.chain.accept(token);
    const FinishReason end = emit(slot, token, logits);
    if (end != FinishReason::None) {
        finish(slot, end, {}, true);
        return;
    }
    slot.next_token = token;
    slot.generating = true;
}

// Hands a sampled and accepted token to the job's output (text, stop
// strings, logprobs, max_tokens) and counts it; returns how the output
// ended with it (None: it goes on).
FinishReason Scheduler::emit(Slot& slot, int32_t token, std::span<const float> logits) {
    const GenerationRequest& r = slot.job->request;
    const auto now = Clock::now();
    auto step = slot.output->push(token, logits);
    if (step.finish != FinishReason::EndOfGeneration) {
        if (slot.generated == 0) {
            slot.job->first_token_at = now;
            metrics_.ttft.observe(seconds(now - r.arrival));
        } else {
            metrics_.tpot.observe(seconds(now - slot.last_token_at));
        }
        slot.last_token_at = now;
        ++slot.generated;
        ++metrics_.generation_tokens;
    }
    Event text;
    text.text = std::move(step.text);
    if (step.logprob) text.logprobs.push_back(std::move(*step.logprob));
    if (!text.text.empty() || !text.logprobs.empty()) slot.job->push(std::move(text));
    return step.finish;
}

void Scheduler::publish_usage() {
    gauges_.kv_used = ctx_->cells_used();
    if (!checkpoints_) return;
    // Deltas: with many models, every scheduler adds its own to the sums.
    const auto bytes = static_cast<int64_t>(checkpoints_->bytes());
    metrics_.checkpoint_bytes += bytes - published_checkpoint_bytes_;
    published_checkpoint_bytes_ = bytes;
    metrics_.checkpoints_evicted += checkpoints_->evicted() - published_evictions_;
    published_evictions_ = checkpoints_->evicted();
}

// The slot's recurrent state after its whole chunks so far, for a later
// prompt that shares them (only where the budget has room for it).
void Scheduler::keep_checkpoint(Slot& slot) {
    if (!checkpoints_ || !checkpoints_->make_room(slot.cached.size())) return;
    std::vector<std::byte> state = ctx_->checkpoint(slot.seq);
    if (state.empty()) return;
    checkpoints_->put(slot.seq, slot.cached, std::move(state));
    ++metrics_.checkpoints_taken;
}

void Scheduler::forget_checkpoints(Slot& slot, size_t keep) {
    if (checkpoints_) checkpoints_->drop_after(slot.seq, keep);
}

// Evicts the cells idle slots keep for prefix reuse (least recently used
// first) until `batch` fits, then decodes it.
model::DecodeStatus Scheduler::decode_making_room(const model::Batch& batch) {
    auto status = ctx_->decode(batch);
    if (status.code != model::DecodeCode::NoRoom) return status;
    std::vector<Slot*> idle;
    for (Slot& s : slots_)
        if (!s.job && !s.cached.empty()) idle.push_back(&s);
    std::sort(idle.begin(), idle.end(),
              [](const Slot* a, const Slot* b) { return a->last_use < b->last_use; });
    for (Slot* s : idle) {
        (void)ctx_->seq_remove(s->seq, 0, -1);
        s->source->forget();
        s->cached.clear();
        s->canonical = 0;
        forget_checkpoints(*s, 0);
        if (ctx_->cells_free() >= batch.size()) break;
    }
    return ctx_->decode(batch);
}

void Scheduler::fail_batch(const model::DecodeStatus& status, const std::vector<Slot*>& in) {
    logger().error("server: decode failed: {}", status.message);
    for (Slot* s : in) finish(*s, FinishReason::Failed, "decode failed: " + status.message, false);
}

// One call per group of at most kDecodeRowsPerCall rows: a product of that
// many rows equals the single-row product bit for bit, so a token does not
// depend on what else the server is doing -- nor on whether it was verified
// as a draft or decoded alone, nor on which group it rode in.
void Scheduler::decode_step() {
    static_assert(kMaxDraft + 1 == kDecodeRowsPerCall);
    std::vector<Slot*> generating;
    for (Slot& s : slots_)
        if (s.job && s.generating) generating.push_back(&s);
    if (generating.empty()) return;
    // Each step another slot goes first, so that no slot's drafts always get
    // the spare rows before the others'.
    std::rotate(generating.begin(),
                generating.begin() + static_cast<long>(draft_turn_++ % generating.size()),
                generating.end());
    for (const auto& group : plan_drafts(generating)) decode_group(group);
}

// Drafts ride only in rows the calls would leave empty: speculation never
// adds a call (when 16 or more sequences decode, the batch is full and no
// one speculates). The sequences are split into as few calls as they need,
// of near-equal size, and each call's spare rows are shared among its
// drafting sequences in turn: each takes at most its fair part of what is
// left, and what it leaves unused goes to the ones after it. A draft never
// reaches past the request's max_tokens. The draft model's proposals of the
// step run together (propose_with_model); each is planned at its full
// length, which it has unless it fails.
std::vector<std::vector<Scheduler::Slot*>> Scheduler::plan_drafts(
    const std::vector<Slot*>& generating) {
    const size_t calls = (generating.size() + kDecodeRowsPerCall - 1) / kDecodeRowsPerCall;
    std::vector<std::vector<Slot*>> groups;
    std::vector<std::pair<Slot*, uint32_t>> by_model;  // slots and their draft lengths
    const auto room_left = [](const Slot& s) {
        const size_t left =
            s.job->request.max_tokens - std::min(s.generated, s.job->request.max_tokens);
        return s.draft_max > 0 ? std::min(size_t(s.draft_len), left > 0 ? left - 1 : 0) : 0;
    };
    for (size_t c = 0; c < calls; ++c) {
        const size_t first = c * generating.size() / calls;
        const size_t end = (c + 1) * generating.size() / calls;
        groups.emplace_back(generating.begin() + long(first), generating.begin() + long(end));
        size_t spare = kDecodeRowsPerCall - (end - first);
        size_t drafting = 0;  // the group's slots after this one that may draft
        for (size_t i = first; i < end; ++i) drafting += room_left(*generating[i]) > 0;
        for (size_t i = first; i < end; ++i) {
            Slot* s = generating[i];
            s->draft.clear();
            const size_t wanted = room_left(*s);
            if (wanted == 0) continue;
            const size_t fair = (spare + drafting - 1) / drafting;
            --drafting;
            const size_t most = std::min(wanted, fair);
            if (most == 0) continue;
            if (s->model_source) {
                by_model.emplace_back(s, uint32_t(most));
                spare -= most;
                continue;
            }
            s->cached.push_back(s->next_token);  // the sequence's tokens so far
            s->draft = s->source->propose(s->cached, uint32_t(most));
            s->cached.pop_back();
            if (!s->source->error().empty()) drop_drafts_of_idle(*s);
            spare -= s->draft.size();
        }
    }
    propose_with_model(by_model);
    return groups;
}

// The draft model's proposals for these slots, one shared draft call per
// step of theirs (ContextDrafter::propose).
void Scheduler::propose_with_model(const std::vector<std::pair<Slot*, uint32_t>>& slots) {
    if (slots.empty()) return;
    std::vector<ContextDrafter::Proposal> proposals;
    for (const auto& [s, most] : slots) {
        s->cached.push_back(s->next_token);  // the sequence's tokens so far
        proposals.push_back({s->model_source, s->cached, most});
    }
    drafter_->propose(proposals);
    for (const auto& [s, most] : slots) {
        s->cached.pop_back();
        s->draft = s->model_source->draft();
        if (!s->model_source->error().empty()) drop_drafts_of_idle(*s);
    }
}

// A draft model's proposal failed (its cells full, most likely: idle slots
// keep theirs for reuse, as the target's): no draft this step, and the idle
// slots' draft cells and this one's go, so that the next proposals fit.
void Scheduler::drop_drafts_of_idle(Slot& failed) {
    logger().debug("server: no draft for sequence {} this step: {}", failed.seq,
                   failed.source->error());
    for (Slot& s : slots_)
        if (!s.job) s.source->forget();
    failed.source->forget();
}

void Scheduler::decode_group(const std::vector<Slot*>& group) {
    model::Batch batch;
    std::vector<uint32_t> first_row;
    for (Slot* s : group) {
        first_row.push_back(uint32_t(batch.size()));
        const auto pos = static_cast<int32_t>(s->cached.size());
        batch.add(s->next_token, pos, {s->seq}, true);
        for (size_t j = 0; j < s->draft.size(); ++j)
            batch.add(s->draft[j], pos + 1 + int32_t(j), {s->seq}, true);
    }
    auto status = decode_making_room(batch);
    if (status.code == model::DecodeCode::NoRoom) {
        if (batch.size() > group.size()) {  // without the drafts it may fit
            for (Slot* s : group) s->draft.clear();
            decode_group(group);
            return;
        }
        // Still full: the longest of these requests ends where it is.
        Slot* longest = *std::max_element(group.begin(), group.end(), [](Slot* a, Slot* b) {
            return a->cached.size() < b->cached.size();
        });
        logger().warn("server: KV cache full ({} cells); a request ends at {} positions", n_ctx_,
                      longest->cached.size());
        finish(*longest, FinishReason::Length, {}, false);
        return;
    }
    if (!status) {
        fail_batch(status, group);
        return;
    }
    for (size_t i = 0; i < group.size(); ++i) verify_slot(*group[i], first_row[i]);
}

// The sequence's rows are its next token and its draft. Row j's logits are
// exactly those a plain step would see once the draft's first j tokens were
// emitted, so sampling them in order with the sequence's own chain gives the
// tokens plain decoding gives -- greedy or seeded -- for as long as each
// sampled token equals the draft token that the next row was fed. The first
// that differs is still emitted (it is what plain decoding chose there); the
// rows after it are dropped from the cache.
void Scheduler::verify_slot(Slot& slot, uint32_t first_row) {
    const auto pos = static_cast<int32_t>(slot.cached.size());
    const size_t drafted = slot.draft.size();
    FinishReason end = FinishReason::None;
    std::string why;
    int32_t token = -1;
    size_t row = 0, accepted = 0;
    for (;; ++row) {
        const auto logits = ctx_->logits(first_row + uint32_t(row));
        token = slot.chain.sample(logits);
        if (token < 0) {  // a grammar stage left no candidate (its error says why)
            end = FinishReason::Failed;
            why = slot.chain.error();
            break;
        }
        slot.chain.accept(token);
        const bool matches = row < drafted && token == slot.draft[row];
        accepted += matches;
        end = emit(slot, token, logits);
        if (end != FinishReason::None || !matches) break;
    }
    // Rows 0..row hold tokens of the sequence: its next token and the
    // draft tokens that were emitted before row `row` was sampled.
    slot.cached.push_back(slot.next_token);
    slot.cached.insert(slot.cached.end(), slot.draft.begin(), slot.draft.begin() + long(row));
    if (row < drafted) (void)ctx_->seq_remove(slot.seq, pos + int32_t(row) + 1, -1);
    if (drafted > 0) {
        slot.drafted += uint32_t(drafted);
        slot.accepted += uint32_t(accepted);
        metrics_.spec_drafted_tokens += drafted;
        metrics_.spec_accepted_tokens += accepted;
        slot.draft_len = adapt_draft_length(slot.draft_len, slot.draft_max, drafted, accepted);
        slot.source->accept(row);  // the draft tokens now in the cells
    }
    slot.draft.clear();
    if (end != FinishReason::None) {
        finish(slot, end, std::move(why), end != FinishReason::Failed);
        return;
    }
    slot.next_token = token;
}

// Chunks of the pending prompts, oldest first, each alone in its call and
// ending at the next multiple of prefill_chunk, until prefill_budget tokens
// are spent: a position is always computed in the same chunk of the same
// prompt tokens, so cells reused from another request hold exactly what this
// request would have computed itself. Several short prompts per step keep the
// time to first token down when many requests arrive at once.
void Scheduler::prefill_step() {
    std::vector<Slot*> pending;
    for (Slot& s : slots_)
        if (s.job && !s.generating) pending.push_back(&s);
    std::sort(pending.begin(), pending.end(),
              [](const Slot* a, const Slot* b) { return a->admitted < b->admitted; });
    size_t spent = 0;
    for (Slot* next : pending) {
        if (spent >= options_.prefill_budget) break;
        const size_t done = prefill_chunk_of(*next);
        if (done == 0) break;
        spent += done;
    }
}

PrefillShape Scheduler::prefill_shape() const {
    static_assert(PrefillShape::kFewRows == kDecodeRowsPerCall);
    PrefillShape shape;
    shape.chunk = options_.prefill_chunk;
    shape.most_rows = std::max(options_.batch, options_.prefill_chunk);
    return shape;
}

size_t Scheduler::prefill_chunk_of(Slot& slot) {
    const auto& prompt = slot.job->request.prompt;
    const size_t chunk = options_.prefill_chunk;
    const size_t from = slot.cached.size();
    // Admission resumed only where such a call exists; the fallback (the
    // chunk's rest) is never taken.
    size_t to = prefill_call_end(from, prompt.size(), prefill_shape());
    if (to == 0) to = std::min(prompt.size(), (from / chunk + 1) * chunk);
    model::Batch batch;
    for (size_t p = from; p < to; ++p)
        batch.add(prompt[p], static_cast<int32_t>(p), {slot.seq}, p + 1 == prompt.size());
    const Clock::time_point started = Clock::now();
    auto status = decode_making_room(batch);
    if (status.code == model::DecodeCode::NoRoom) {
        const bool others = std::any_of(slots_.begin(), slots_.end(),
                                        [&](const Slot& s) { return s.job && s.generating; });
        if (!others)  // nothing will free cells: this prompt cannot fit now
            finish(slot, FinishReason::NoRoom,
                   fmt::format("the KV cache is full ({} cells)", n_ctx_), false);
        return 0;  // else try again once running requests finish
    }
    if (!status) {
        fail_batch(status, {&slot});
        return to - from;
    }
    Job& job = *slot.job;  // recorded before sample_slot, which may end the job
    if (job.prefill_chunk_count++ < Job::kRecordedChunks)
        job.prefill_chunks.push_back({started, Clock::now(), static_cast<uint32_t>(to - from)});
    slot.cached.insert(slot.cached.end(), prompt.begin() + long(from), prompt.begin() + long(to));
    // Every position so far was computed as from scratch (prefill_plan.h):
    // the state at a chunk's end serves any longer prompt, the one at the
    // prompt's end a next turn (where prefill_call_end allows).
    if (to % chunk == 0) {
        slot.canonical = to;
        keep_checkpoint(slot);
    } else if (to == prompt.size()) {
        keep_checkpoint(slot);
    }
    if (to == prompt.size()) sample_slot(slot, ctx_->logits(static_cast<uint32_t>(to - from - 1)));
    return to - from;
}

bool Scheduler::advance() {
    const auto now = Clock::now();
    for (Slot& s : slots_) {
        if (!s.job) continue;
        if (s.job->cancelled())
            finish(s, FinishReason::Cancelled, "cancelled by its caller", false);
        else if (now > s.job->request.deadline)
            finish(s, FinishReason::Timeout, "server.request_timeout passed", false);
    }
    if (std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return bool(s.job); })) {
        publish_usage();
        return false;
    }
    decode_step();
    prefill_step();
    publish_usage();
    return true;
}

}  // namespace ferrox::server
