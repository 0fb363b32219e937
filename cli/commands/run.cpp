// `ferrox run`: load a GGUF model, stream generated text to stdout, and report
// prompt and generation speed on stderr, llama.cpp-style. Runs on the public
// C API (ferrox/ferrox.h) alone, as any program would: the model, the prompt's
// tokens, the context and its decodes, the sampler, the streamed text and the
// reports all come through it. The one exception is speculation's draft
// source (ferrox/draft_source.h): prompt lookup, a pure function over the
// token ids, or a draft model (draft_model.h, itself over the C API); either
// way verification goes through the C API's decode, logits and seq_remove.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api_model.h"
#include "chat_prompt.h"
#include "commands/commands.h"
#include "draft_model.h"
#include "ferrox/draft_source.h"
#include "ferrox/ferrox.h"
#include "ferrox/log.h"
#include "input.h"
#include "model_reference.h"
#include "model_session.h"
#include "output.h"
#include "profile_report.h"
#include "sampler_flags.h"
#include "signals.h"
#include "stopwatch.h"

namespace ferrox::cli {
namespace {

// --model-draft's draft length when --spec-draft-n-max does not name one.
constexpr uint32_t kModelDraftMax = 8;

ferrox_sampler_params default_sampling() {
    ferrox_sampler_params p;
    ferrox_sampler_params_default(&p);
    return p;
}

struct RunOptions {
    std::string model_path, prompt, prompt_file;
    int n_predict = 128;
    ModelChoices model;
    // The chain `run` has always drawn with: the API's defaults are its flags' defaults.
    ferrox_sampler_params sampling = default_sampling();
    std::vector<std::string> stops;
    GrammarFlags grammar;
    bool chat = false, json = false, profile = false;
    // --spec-draft-n-max: speculation's draft length (docs/speculation.md);
    // without it, --model-draft drafts kModelDraftMax.
    uint32_t draft_max = 0;
    bool draft_max_given = false;
    std::string model_draft;  // --model-draft: drafts from this model, not prompt lookup
    ChatOptions chat_options;
    ModelSourceFlags source;
};

// Text written by a call that fills a caller buffer (ferrox_model_meta's
// shape): asked again with the size it needs when the first buffer is short.
template <class Call>
ferrox_code read_text(std::string& out, ferrox_call_status& st, Call&& call) {
    size_t needed = 0;
    out.resize(std::max<size_t>(out.size(), 256));
    ferrox_code code = call(out.data(), out.size(), &needed, &st);
    if (code == FERROX_CODE_BUFFER_TOO_SMALL) {
        out.resize(needed + 1);
        code = call(out.data(), out.size(), &needed, &st);
    }
    out.resize(code == FERROX_CODE_OK ? needed : 0);
    return code;
}

std::vector<int32_t> tokenize(const ferrox_model* model, std::string_view text, bool add_special,
                              bool parse_special, ferrox_call_status& st, ferrox_code& code) {
    std::vector<int32_t> ids(text.size() + 2);  // a first guess; asked again when short
    size_t n = 0;
    code = ferrox_tokenize(model, text.data(), text.size(), add_special, parse_special, ids.data(),
                           ids.size(), &n, &st);
    if (code == FERROX_CODE_BUFFER_TOO_SMALL) {
        ids.resize(n);
        code = ferrox_tokenize(model, text.data(), text.size(), add_special, parse_special,
                               ids.data(), ids.size(), &n, &st);
    }
    ids.resize(code == FERROX_CODE_OK ? n : 0);
    return ids;
}

// --chat: the prompt as one user turn, rendered and tokenized by ferrox.h
// (the model's template, or --chat-template's file or built-in), the user's
// text never read for control tokens.
Expected<ChatPrompt> chat_prompt(const ferrox_model* model, const ChatOptions& options,
                                 const std::string& user) {
    auto flag = read_chat_template_flag(options.chat_template);
    if (!flag) return flag.error();
    const ferrox_chat_message message{"user", user.data(), user.size()};
    ferrox_chat_params params;
    ferrox_chat_params_default(&params);
    params.messages = &message;
    params.n_messages = 1;
    if (!flag->origin.empty()) {
        params.chat_template = flag->source.c_str();
        params.template_origin = flag->origin.c_str();
    }
    if (!flag->name.empty()) params.template_name = flag->name.c_str();
    ferrox_call_status st = fresh_status();
    ferrox_chat_prompt* raw = nullptr;
    if (ferrox_chat_apply_template(model, &params, &raw, &st) != FERROX_CODE_OK)
        return make_error("{}", st.message);
    const ChatPromptHandle rendered(raw, ferrox_chat_prompt_free);
    size_t bytes = 0, n = 0;
    const char* text = ferrox_chat_prompt_text(raw, &bytes);
    const int32_t* ids = ferrox_chat_prompt_tokens(raw, &n);
    return ChatPrompt{std::string(text, bytes), std::vector<int32_t>(ids, ids + n), {}};
}

// The context's profile so far (and emptied), as rows.
Expected<OpProfile> take_profile(ferrox_context* ctx) {
    ferrox_call_status st = fresh_status();
    const char* json = nullptr;
    if (ferrox_context_profile(ctx, &json, &st) != FERROX_CODE_OK)
        return make_error("{}", st.message);
    auto rows = parse_profile(json);
    if (ferrox_context_profile_reset(ctx, &st) != FERROX_CODE_OK)
        return make_error("{}", st.message);
    return rows;
}

int run(const CommonOptions& common, RunOptions o) {
    if (const int status = resolve_model_argument(o.model_path, o.source, "--model");
        status != kExitOk)
        return status;
    if (!o.model_draft.empty()) {
        if (const int status = resolve_model_argument(o.model_draft, o.source, "--model-draft");
            status != kExitOk)
            return status;
        if (!o.draft_max_given) o.draft_max = kModelDraftMax;
    }
    if (o.prompt.empty() && o.prompt_file.empty()) {
        logger().error("run: give the prompt with -p/--prompt or -f/--file");
        return kExitBadInput;
    }
    if (o.model.special && (o.chat || !o.chat_options.chat_template.empty()))
        return usage_error("--special",
                           "with --chat the prompt is the user's message, which is "
                           "never read for control tokens; leave one out");
    if (!o.prompt_file.empty()) {
        auto text = read_text_file(o.prompt_file, "--file");
        if (!text) {
            logger().error("{}", text.error().message());
            return kExitBadInput;
        }
        o.prompt = std::move(*text);
    }
    // --grammar / --json-schema: checked here, before the model loads; the
    // text then goes to the C API's sampler, whose chain applies it.
    auto grammar = read_grammar_source(o.grammar);
    if (grammar && *grammar) {
        if (auto checked = compile_grammar(**grammar); !checked) grammar = checked.error();
    }
    if (!grammar) {
        logger().error("{}", grammar.error().message());
        return kExitBadInput;
    }
    const auto load_start = Clock::now();
    std::fprintf(stderr, "loading %s ...\n", shown(o.model_path).c_str());
    // The configuration's log level (the API reads the file again for the rest).
    if (auto config = load_session_config(common); !config) {
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    ferrox_call_status st = fresh_status();
    ApiModelParams params(common, o.model);
    params.log_progress();
    ferrox_model* raw_model = nullptr;
    const ferrox_code loaded =
        ferrox_model_load(o.model_path.c_str(), params.get(), &raw_model, &st);
    if (!succeeded(loaded, st)) return exit_status_of_load(loaded);
    const ModelHandle model(raw_model, ferrox_model_free);
    const ferrox_model* m = model.get();
    const uint32_t n_ctx = ferrox_model_n_ctx(m);  // the engine warned if past training
    const char* capacity = "";
    if (!succeeded(ferrox_model_capacity_summary(m, &capacity, &st), st)) return kExitFailure;
    const uint32_t vocab = ferrox_model_vocab(m);
    // A rejected draft is rolled back by dropping the sequence's tail, which a
    // recurrent model's state cannot do: speculation is off for it.
    uint32_t draft_max = o.draft_max;
    if (draft_max > 0 && ferrox_model_is_recurrent(m)) {
        logger().warn(
            "{}: {} speculation is off for '{}': its recurrent layers cannot roll back a "
            "rejected draft",
            o.model_draft.empty() ? "--spec-draft-n-max" : "--model-draft",
            o.model_draft.empty() ? "n-gram" : "draft-model", ferrox_model_arch(m));
        draft_max = 0;
    }
    // Where drafts come from: the draft model (same vocabulary, checked
    // here, before any work), or the sequence's own tokens.
    std::unique_ptr<DraftModel> draft_model;
    NgramDraftSource ngram;
    DraftSource* source = nullptr;
    if (draft_max > 0 && !o.model_draft.empty()) {
        std::fprintf(stderr, "loading draft %s ...\n", shown(o.model_draft).c_str());
        ferrox_model* raw_draft = nullptr;
        const ferrox_code draft_loaded =
            ferrox_model_load(o.model_draft.c_str(), params.get(), &raw_draft, &st);
        if (!succeeded(draft_loaded, st)) return exit_status_of_load(draft_loaded);
        auto opened = DraftModel::open(m, ModelHandle(raw_draft, ferrox_model_free));
        if (!opened) {
            logger().error("{}", opened.error().message());
            return kExitBadInput;
        }
        draft_model = std::move(*opened);
        source = &draft_model->source();
    } else if (draft_max > 0) {
        source = &ngram;
    }
    std::fprintf(stderr, "loaded %s: %u layers, %u embd, vocab %u, context %u; %s (%.2f s)\n",
                 ferrox_model_arch(m), ferrox_model_n_layer(m), ferrox_model_n_embd(m), vocab,
                 n_ctx, capacity, seconds_since(load_start));

    ChatPrompt prompt{o.prompt, {}, {}};
    if (o.chat || !o.chat_options.chat_template.empty()) {
        auto rendered = chat_prompt(m, o.chat_options, o.prompt);
        if (!rendered) {
            logger().error("{}", rendered.error().message());
            return kExitBadInput;
        }
        prompt = std::move(*rendered);
    } else {
        // The prompt's own special-token text stays text unless --special asks.
        ferrox_code code = FERROX_CODE_OK;
        prompt.tokens = tokenize(m, prompt.text, true, o.model.special, st, code);
        if (!succeeded(code, st)) return kExitBadInput;
    }
    if (o.chat_options.verbose_prompt) print_verbose_prompt(prompt);
    std::vector<int32_t> tokens = std::move(prompt.tokens);
    if (tokens.empty()) {
        logger().error("the prompt encodes to no tokens");
        return kExitBadInput;
    }
    const size_t n_prompt = tokens.size();
    if (n_prompt + static_cast<size_t>(std::max(o.n_predict, 0)) > n_ctx)
        o.n_predict = static_cast<int>(n_ctx) - static_cast<int>(n_prompt);
    if (o.n_predict < 0) {
        logger().error("the prompt ({} tokens) does not fit the context ({}); raise -c", n_prompt,
                       n_ctx);
        return kExitBadInput;
    }

    // One sequence over the model's cells and batch; --profile: its ops timed.
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    cp.profile = o.profile ? 1 : 0;
    ferrox_context* raw_ctx = nullptr;
    if (!succeeded(ferrox_context_new(m, &cp, &raw_ctx, &st), st)) return kExitFailure;
    const ContextHandle ctx(raw_ctx, ferrox_context_free);
    if (*grammar) {
        const GrammarSource& g = **grammar;
        o.sampling.model = m;
        (g.is_schema ? o.sampling.json_schema : o.sampling.grammar) = g.text.data();
        (g.is_schema ? o.sampling.json_schema_len : o.sampling.grammar_len) = g.text.size();
    }
    ferrox_sampler* raw_sampler = nullptr;
    if (!succeeded(ferrox_sampler_new(&o.sampling, &raw_sampler, &st), st)) return kExitBadInput;
    const SamplerHandle sampler(raw_sampler, ferrox_sampler_free);
    ferrox_detok_stream* raw_stream = nullptr;
    if (!succeeded(ferrox_detok_stream_new(m, &raw_stream, &st), st)) return kExitFailure;
    const DetokHandle stream(raw_stream, ferrox_detok_stream_free);
    // The stream holds back what may begin a stop string and ends at the first to complete.
    for (const std::string& stop : o.stops)
        if (ferrox_detok_stream_add_stop(stream.get(), stop.data(), stop.size(), &st) !=
            FERROX_CODE_OK)
            return usage_error("--stop", "{}", st.message);

    catch_interrupts();  // from here a first Ctrl-C stops after the current token
    const auto prompt_start = Clock::now();
    // Chunks of the model's batch, only the last token's logits wanted.
    const size_t chunk = std::max(1u, ferrox_model_n_batch(m));
    size_t last_index = 0;
    for (size_t start = 0; start < n_prompt; start += chunk) {
        const size_t n = std::min(chunk, n_prompt - start);
        const bool last = start + n == n_prompt;
        const LogitsFor logits = last ? LogitsFor::Last : LogitsFor::None;
        if (!succeeded(decode_one_sequence(ctx.get(), tokens, start, n, logits, st), st))
            return kExitFailure;
        last_index = n - 1;
    }
    const float* logits = nullptr;
    if (!succeeded(ferrox_logits(ctx.get(), static_cast<uint32_t>(last_index), &logits, &st), st))
        return kExitFailure;
    const double prompt_s = seconds_since(prompt_start);
    // --profile: the prompt's ops, then (after a reset) the generation's.
    OpProfile prompt_profile, profile;
    if (o.profile) {
        auto taken = take_profile(ctx.get());
        if (!taken) {
            logger().error("{}", taken.error().message());
            return kExitFailure;
        }
        prompt_profile = std::move(*taken);
    }
    if (!succeeded(ferrox_sampler_accept(sampler.get(), tokens.data(), n_prompt, &st), st))
        return kExitFailure;

    std::string generated, piece;
    int n_eval = 0;
    bool stopped = false;
    // Speculation (docs/speculation.md): the last verify decode put
    // tokens.back() at position `verify_at` and `draft` after it, one logits
    // row each; `row` is the row the next draw reads. A draw equal to the
    // draft token its next row was fed moves to that row without a decode.
    std::vector<int32_t> draft;
    size_t verify_at = 0, row = 0;
    uint32_t draft_len = draft_max;
    uint64_t drafted = 0, accepted = 0, passes = 0;
    const auto eval_start = Clock::now();
    for (int i = 0; i < o.n_predict && !stopped && !interrupted(); ++i) {
        int32_t next = -1;
        // The first draw reads the prompt's logits: it is the prompt's, so
        // that a generation step is one forward and one draw.
        const auto sample_start = Clock::now();
        const ferrox_code sampled = ferrox_sampler_sample(sampler.get(), logits, vocab, &next, &st);
        if (o.profile)
            (i == 0 ? prompt_profile : profile)
                .add({"sample", "sample", "F32", 1,
                      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                Clock::now() - sample_start)
                                                .count()),
                      0});
        if (!succeeded(sampled, st)) return kExitFailure;
        if (ferrox_model_is_end_of_generation(m, next)) break;
        tokens.push_back(next);
        // The history, and the grammar (when any) over the token's text.
        if (!succeeded(ferrox_sampler_accept_token(sampler.get(), next, &st), st) ||
            !succeeded(read_text(piece, st,
                                 [&](char* b, size_t c, size_t* n, ferrox_call_status* s) {
                                     return ferrox_detok_stream_push(stream.get(), next, b, c, n,
                                                                     s);
                                 }),
                       st))
            return kExitFailure;
        generated += piece;
        if (!o.json) std::cout << escape_text(piece, EscapeFor::Text);
        if (!o.json && !stdout_ok()) break;  // main() reports the write error
        stopped = ferrox_detok_stream_stopped(stream.get()) != 0;
        if (stopped || i + 1 == o.n_predict) break;
        ++n_eval;
        if (row < draft.size() && next == draft[row]) {  // verified: its row is computed
            ++accepted;
            ++row;
            if (!succeeded(ferrox_logits(ctx.get(), static_cast<uint32_t>(row), &logits, &st), st))
                return kExitFailure;
            continue;
        }
        // The rows after the one just read hold rejected draft tokens.
        if (row < draft.size() &&
            !succeeded(
                ferrox_seq_remove(ctx.get(), 0, static_cast<int32_t>(verify_at + row + 1), -1, &st),
                st))
            return kExitFailure;
        if (!draft.empty()) {
            draft_len = adapt_draft_length(draft_len, draft_max, draft.size(), row);
            source->accept(row);
        }
        // Up to draft_len tokens, never past -n: the pass emits one more.
        const auto left = static_cast<uint32_t>(o.n_predict - i - 2);
        draft.clear();
        if (source) draft = source->propose(tokens, std::min(draft_len, left));
        if (source && !source->error().empty()) {
            logger().error("{}", source->error());
            return kExitFailure;
        }
        drafted += draft.size();
        verify_at = tokens.size() - 1;
        row = 0;
        tokens.insert(tokens.end(), draft.begin(), draft.end());
        const ferrox_code decoded =
            decode_one_sequence(ctx.get(), tokens, verify_at, draft.size() + 1, LogitsFor::All, st);
        tokens.resize(verify_at + 1);
        ++passes;
        if (!succeeded(decoded, st) || !succeeded(ferrox_logits(ctx.get(), 0, &logits, &st), st))
            return kExitFailure;
    }
    // The end: what was held back (nothing after a stop).
    if (!succeeded(read_text(piece, st,
                             [&](char* b, size_t c, size_t* n, ferrox_call_status* s) {
                                 return ferrox_detok_stream_push(stream.get(), -1, b, c, n, s);
                             }),
                   st))
        return kExitFailure;
    generated += piece;
    if (!o.json)
        std::cout << escape_text(piece, EscapeFor::Text) << "\n"
                  << std::flush;  // before the stats on stderr
    const double eval_s = seconds_since(eval_start);
    if (ferrox_sampler_grammar_state(sampler.get()) == FERROX_GRAMMAR_OPEN)
        std::fprintf(stderr, "grammar: the output stopped before the grammar was complete\n");
    if (interrupted())
        std::fprintf(stderr, "interrupted: stopped after %zu generated tokens\n",
                     tokens.size() - n_prompt);
    if (o.profile) {
        auto taken = take_profile(ctx.get());
        if (!taken) {
            logger().error("{}", taken.error().message());
            return kExitFailure;
        }
        const OpProfile draws = std::move(profile);  // the draws the CLI timed
        profile = std::move(*taken);
        for (const OpTiming& t : draws.rows) profile.add(t);
    }

    const double prompt_tps = static_cast<double>(n_prompt) / prompt_s;
    const double eval_tps = n_eval > 0 ? n_eval / eval_s : 0.0;
    std::fprintf(stderr, "prompt eval: %zu tokens, %.2f tok/s; eval: %d tokens, %.2f tok/s\n",
                 n_prompt, prompt_tps, n_eval, eval_tps);
    if (source)
        std::fprintf(stderr, "speculation (%s): %llu drafted, %llu accepted, %llu decode passes\n",
                     source->kind(), static_cast<unsigned long long>(drafted),
                     static_cast<unsigned long long>(accepted),
                     static_cast<unsigned long long>(passes));
    // What actually ran, from the registry's dispatch records.
    std::string report;
    if (!succeeded(read_text(report, st,
                             [&](char* b, size_t c, size_t* n, ferrox_call_status* s) {
                                 return ferrox_model_kernel_report(m, b, c, n, s);
                             }),
                   st))
        return kExitFailure;
    const auto kernel_doc = nlohmann::json::parse(report, nullptr, false);
    if (kernel_doc.is_discarded()) {
        logger().error("the kernel report the engine returned does not read");
        return kExitFailure;
    }
    std::fprintf(stderr, "kernels: %llu calls, %llu through a fallback (run --json lists them)\n",
                 static_cast<unsigned long long>(kernel_doc.value("calls", uint64_t{0})),
                 static_cast<unsigned long long>(kernel_doc.value("fallback_calls", uint64_t{0})));
    if (o.profile && !o.json)
        std::fprintf(stderr,
                     "\nprofile, prompt (%zu tokens in one pass per %u):\n%s\nprofile, "
                     "generation (%d steps):\n%s",
                     n_prompt, ferrox_model_n_batch(m),
                     render_profile(prompt_profile, prompt_s, 1).c_str(), n_eval,
                     render_profile(profile, eval_s, static_cast<uint64_t>(n_eval)).c_str());
    if (o.json) {
        ferrox_residency residency{};
        residency.struct_size = sizeof residency;
        if (!succeeded(ferrox_model_residency(m, &residency, &st), st)) return kExitFailure;
        nlohmann::json doc{
            {"model", o.model_path},
            {"prompt_tokens", n_prompt},
            {"generated_tokens", tokens.size() - n_prompt},
            {"text", generated},
            {"tokens", std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(n_prompt),
                                            tokens.end())},
            {"prompt_tokens_per_s", prompt_tps},
            {"eval_tokens_per_s", eval_tps},
            {"kernels", kernel_doc.at("kernels")},
            {"resident", residency.resident != 0},
            {"residency", residency.resident
                              ? std::string("forward pass resident on ") + residency.backend
                              : std::string("activations in host memory: ") + residency.reason}};
        if (o.profile)
            doc["profile"] = {
                {"prompt", profile_json(prompt_profile, prompt_s, 1)},
                {"generation", profile_json(profile, eval_s, static_cast<uint64_t>(n_eval))}};
        if (source)
            doc["speculation"] = {{"source", source->kind()},
                                  {"draft_max", draft_max},
                                  {"drafted_tokens", drafted},
                                  {"accepted_tokens", accepted},
                                  {"decode_passes", passes}};
        if (interrupted()) doc["interrupted"] = true;
        print_json(std::move(doc));
    }
    return interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

Command add_run_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand("run", "Generate text from a prompt with a GGUF model");
    auto o = std::make_shared<RunOptions>();
    cmd->add_option("-m,--model", o->model_path,
                    "GGUF model file, or a stored model reference (hf://OWNER/REPO/FILE.gguf, "
                    "OWNER/REPO:QUANT; --pull fetches it)")
        ->required();
    add_model_source_flags(*cmd, o->source);
    auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
    auto* file = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from this file");
    prompt->excludes(file);
    add_n_predict_flag(*cmd, o->n_predict, NPredict::Total);
    add_model_choices(*cmd, o->model);
    add_sampler_flags(*cmd, o->sampling);
    add_grammar_flags(*cmd, o->grammar);
    cmd->add_option("--stop", o->stops, "Stop when this text is generated (repeatable)");
    cmd->add_flag("--chat", o->chat,
                  "Wrap the prompt as one user turn in the chat template (the file's, or "
                  "--chat-template's, which implies --chat)");
    add_chat_options(*cmd, o->chat_options);
    auto* draft_max =
        cmd->add_option("--spec-draft-n-max", o->draft_max,
                        "Speculation: draft tokens verified per decode, looked up in the prompt "
                        "and output, or from --model-draft (docs/speculation.md); the text is "
                        "unchanged; 0: off")
            ->check(CLI::Range(0, 15));
    cmd->add_option("--model-draft", o->model_draft,
                    "Speculation's drafts from this smaller model of the same vocabulary "
                    "(GGUF file or stored reference); --spec-draft-n-max defaults to 8 with it");
    cmd->add_flag("--json", o->json, "Print one JSON object at the end instead of streaming");
    cmd->add_flag("--profile", o->profile,
                  "Time every op of the forward pass (per op, tensor role and kind) and print "
                  "the table on stderr, prompt and generation apart (with --json: a \"profile\" "
                  "object)");
    return {cmd, [o, draft_max, &common]() {
                o->draft_max_given = draft_max->count() > 0;
                return run(common, *o);
            }};
}

}  // namespace ferrox::cli
