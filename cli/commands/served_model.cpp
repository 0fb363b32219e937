#include "commands/served_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "ferrox/grammar/matcher.h"
#include "ferrox/log.h"
#include "ferrox/model/context.h"
#include "ferrox/vocabulary_match.h"

namespace ferrox::cli {
namespace {

// Tokens per decode a served model asks for; the engine lowers it to a shorter
// context (a context of 256 cells takes batches of 256).
constexpr uint32_t kServeBatch = 512;
// server.model_draft's draft length when spec_draft_n_max is 0 (ferrox run's too).
constexpr uint32_t kModelDraftMax = 8;

}  // namespace

ModelChoices serve_model_choices(const ServerConfig& s, unsigned threads) {
    ModelChoices choices;
    choices.threads = threads;
    choices.kv_type = s.kv_type;
    choices.kv_type_k = s.kv_type_k;  // empty: kv_type's
    choices.kv_type_v = s.kv_type_v;
    choices.context = s.context;  // 0: the engine's rule, parallel x min(4096, training)
    choices.sequences = s.parallel;
    choices.batch = kServeBatch;
    choices.embeddings = true;
    return choices;
}

void ServedModel::begin_drain() {
    if (scheduler_) scheduler_->begin_drain();
    if (embedder_) embedder_->begin_drain();
}

bool ServedModel::wait_idle(server::Clock::time_point deadline) {
    return scheduler_ ? scheduler_->wait_idle(deadline) : embedder_->wait_idle(deadline);
}

void ServedModel::stop() {
    if (scheduler_) scheduler_->stop();
    if (embedder_) embedder_->stop();
}

Expected<std::unique_ptr<ServedModel>> make_served_model(const Engine& e, const ServerConfig& s,
                                                         const std::string& chat_template,
                                                         server::Metrics& metrics,
                                                         server::LoadGauges* gauges,
                                                         const Engine* draft) {
    auto served = std::make_unique<ServedModel>();
    const model::ContextOptions co = e.context_options();
    const model::Hparams& hp = e.model().hparams();
    server::LoadedModel& loaded = served->loaded_;
    loaded.tokenizer = &e.tokenizer();
    if (hp.pooling != model::Pooling::None) {
        auto ctx = model::Context::create(e.model(), co);
        if (!ctx) return ctx.error();
        server::EmbedderOptions eo;
        eo.pooling = hp.pooling;
        eo.max_queue = s.max_queue;
        served->embedder_ = std::make_unique<server::Embedder>(std::move(*ctx), eo);
        loaded.embedder = served->embedder_.get();
        loaded.n_embd = hp.n_embd;
        loaded.embedding_truncation = s.embedding_truncation;
        loaded.max_positions = co.context;
        if (hp.pooling == model::Pooling::Rank) {
            loaded.reranker = true;
            // llama-server's rerank prompt: the file's named template, when there.
            auto tmpl = e.file().get_string_or("tokenizer.chat_template.rerank", "");
            if (!tmpl) return tmpl.error();
            loaded.rerank_template = std::move(*tmpl);
            served->summary_ = fmt::format(
                "reranking model ({} labels, {}), {} sequences a decode over {} KV cells, up to "
                "{} tokens a query/document pair",
                hp.n_cls_out,
                loaded.rerank_template.empty() ? "pairs joined by its special tokens"
                                               : "pairs through its rerank template",
                co.sequences, co.context, served->embedder_->context());
            return served;
        }
        served->summary_ = fmt::format(
            "embedding model ({} pooling, {} dimensions), {} sequences a decode over {} KV "
            "cells, up to {} tokens an input",
            model::pooling_name(hp.pooling), hp.n_embd, co.sequences, co.context,
            served->embedder_->context());
        return served;
    }
    auto tmpl = choose_chat_template(e.file(), chat_template);
    if (!tmpl) return tmpl.error();
    served->renderer_ = std::make_unique<ChatRenderer>(std::move(*tmpl), e.file(), e.tokenizer());
    auto ctx = model::Context::create(e.model(), co);
    if (!ctx) return ctx.error();
    server::SchedulerOptions so;
    so.sequences = co.sequences;
    so.prefill_chunk = std::min(so.prefill_chunk, co.batch);  // a chunk is one decode
    so.batch = co.batch;
    so.max_queue = s.max_queue;
    so.draft_max = s.spec_draft_n_max;
    so.checkpoint_memory = s.checkpoint_memory;
    so.gauges = gauges;
    std::unique_ptr<model::Context> draft_ctx;
    if (draft) {
        if (draft->model().recurrent())
            return make_error(
                "server.model_draft: the draft model '{}' has recurrent layers, whose state "
                "cannot drop a rejected draft's tail; a draft model must be an attention-only one",
                draft->model().hparams().arch_name);
        if (const std::string diff =
                vocabulary_difference(vocabulary_view(e), vocabulary_view(*draft));
            !diff.empty())
            return make_error(
                "server.model_draft: the draft model's vocabulary is not the target's ({} vs "
                "{}): {}",
                hp.arch_name, draft->model().hparams().arch_name, diff);
        if (e.model().recurrent())
            logger().warn(
                "server.model_draft: no drafts for '{}': its recurrent layers cannot roll back a "
                "rejected draft",
                hp.arch_name);
        model::ContextOptions dco = draft->context_options();
        dco.sequences = co.sequences;  // one draft sequence per slot
        auto created = model::Context::create(draft->model(), dco);
        if (!created) return created.error();
        draft_ctx = std::move(*created);
        if (so.draft_max == 0) so.draft_max = kModelDraftMax;
    }
    served->scheduler_ = std::make_unique<server::Scheduler>(
        e.tokenizer(), server::context_over(std::move(*ctx)), so, metrics);
    if (draft_ctx) served->scheduler_->use_draft_model(server::context_over(std::move(draft_ctx)));
    served->scheduler_->start();
    loaded.scheduler = served->scheduler_.get();
    loaded.max_positions = std::min(co.context, hp.n_ctx_train);
    // Once per model, on the first request with a grammar stage (grammar,
    // response_format, tools, a thinking budget): every stage shares it.
    loaded.grammar_vocab = server::GrammarVocab::on_first_use(e.tokenizer());
    const ChatRenderer* renderer = served->renderer_.get();
    const DetectedChatFamily family = detect_family(renderer->chat_template().source());
    logger().info("serve: the chat template writes tool calls and reasoning as the {} family{}",
                  family_info(family.family).name, family.supports_tools ? "" : " (no tools)");
    loaded.render_chat = server::ChatRenderFn(
        [renderer](const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                   const nlohmann::ordered_json& kwargs) -> Expected<server::RenderedChat> {
            auto p = renderer->render(messages, true, tools, kwargs);
            if (!p) return p.error();
            return server::RenderedChat{std::move(p->text), std::move(p->tokens)};
        },
        family);
    served->summary_ = fmt::format("{} sequences over {} KV cells, up to {} positions a request",
                                   co.sequences, co.context, loaded.max_positions);
    return served;
}

}  // namespace ferrox::cli
