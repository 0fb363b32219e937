// `ferrox run`: load a GGUF model, stream generated text to stdout, and report
// prompt and generation speed on stderr, llama.cpp-style.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_prompt.h"
#include "commands/commands.h"
#include "ferrox/kernel_registry.h"
#include "ferrox/log.h"
#include "ferrox/op.h"
#include "ferrox/quant_kind.h"
#include "ferrox/sampling.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "ferrox/tokenizer/utf8_streamer.h"
#include "flag_checks.h"
#include "input.h"
#include "model_session.h"
#include "output.h"
#include "profile_report.h"
#include "signals.h"

namespace ferrox::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

struct RunOptions {
    std::string model_path, prompt, prompt_file;
    int n_predict = 128;
    ModelChoices model;
    SamplerParams sampling;
    std::vector<std::string> stops;
    bool chat = false, json = false, profile = false;
    ChatOptions chat_options;
};

int run(const CommonOptions& common, RunOptions o) {
    if (o.prompt.empty() && o.prompt_file.empty()) {
        logger().error("run: give the prompt with -p/--prompt or -f/--file");
        return kExitBadInput;
    }
    if (!o.prompt_file.empty()) {
        auto text = read_text_file(o.prompt_file, "--file");
        if (!text) {
            logger().error("{}", text.error().message());
            return kExitBadInput;
        }
        o.prompt = std::move(*text);
    }
    // --profile: the prompt's ops, then (after a swap) the generation's.
    model::StepProfile profile, prompt_profile;
    if (o.profile) o.model.profile = &profile;
    const auto load_start = Clock::now();
    std::fprintf(stderr, "loading %s ...\n", shown(o.model_path).c_str());
    auto ms = open_model(common, o.model_path, o.model);
    if (!ms) {
        logger().error("{}", ms.error().message());
        return kExitBadInput;
    }
    model::Model& m = *ms->model;
    const auto& hp = m.hparams();
    std::fprintf(stderr, "loaded %s: %u layers, %u embd, vocab %llu, context %u; %s (%.2f s)\n",
                 hp.arch_name.c_str(), hp.n_layer, hp.n_embd,
                 static_cast<unsigned long long>(hp.vocab), m.context(),
                 m.capacity().summary().c_str(), seconds_since(load_start));

    const Tokenizer& tok = *ms->tokenizer;
    ChatPrompt prompt{o.prompt, {}};
    if (o.chat || !o.chat_options.chat_template.empty()) {
        auto rendered = single_turn_prompt(*ms->file, tok, o.chat_options, o.prompt);
        if (!rendered) {
            logger().error("{}", rendered.error().message());
            return kExitBadInput;
        }
        prompt = std::move(*rendered);
    } else {
        // The prompt's own special-token text stays text unless --special asks.
        prompt.tokens = tok.encode(prompt.text, true, o.model.special);
    }
    if (o.chat_options.verbose_prompt) print_verbose_prompt(prompt);
    std::vector<int32_t> tokens = std::move(prompt.tokens);
    if (tokens.empty()) {
        logger().error("the prompt encodes to no tokens");
        return kExitBadInput;
    }
    const size_t n_prompt = tokens.size();
    if (n_prompt + static_cast<size_t>(std::max(o.n_predict, 0)) > m.context())
        o.n_predict = static_cast<int>(m.context()) - static_cast<int>(n_prompt);
    if (o.n_predict < 0) {
        logger().error("the prompt ({} tokens) does not fit the context ({}); raise -c", n_prompt,
                       m.context());
        return kExitBadInput;
    }

    std::vector<float> logits(m.vocab());
    catch_interrupts();  // from here a first Ctrl-C stops after the current token
    const auto prompt_start = Clock::now();
    if (auto r = m.forward(tokens, 0, logits); !r) {
        logger().error("{}", r.error().message());
        return kExitFailure;
    }
    const double prompt_s = seconds_since(prompt_start);
    std::swap(profile, prompt_profile);
    profile.launch_times = prompt_profile.launch_times;

    Sampler sampler(o.sampling);
    Utf8Streamer streamer;
    std::string pending, generated;  // pending: held back while it might start a stop string
    int n_eval = 0;
    bool stopped = false;
    const auto eval_start = Clock::now();
    for (int i = 0; i < o.n_predict && !stopped && !interrupted(); ++i) {
        int32_t next;
        {
            // The first draw reads the prompt's logits: it is the prompt's, so
            // that a generation step is one forward and one draw.
            model::ScopedStepTimer timer(
                o.profile ? (i == 0 ? &prompt_profile : &profile) : nullptr, "sample", "sample");
            next = sampler.sample(logits, tokens);
        }
        if (tok.is_end_of_generation(next)) break;
        tokens.push_back(next);
        pending += streamer.feed(tok.token_to_piece(next));
        const StopMatch stop = find_stop(pending, o.stops);
        size_t emit = pending.size() - stop.hold;
        if (stop.found != std::string::npos) emit = stop.found, stopped = true;
        generated += pending.substr(0, emit);
        if (!o.json) std::cout << escape_text(pending.substr(0, emit), EscapeFor::Text);
        if (!o.json && !stdout_ok()) break;  // main() reports the write error
        pending.erase(0, stopped ? pending.size() : emit);
        if (stopped || i + 1 == o.n_predict) break;
        if (auto r = m.forward(std::span<const int32_t>(&tokens.back(), 1),
                               static_cast<uint32_t>(tokens.size() - 1), logits);
            !r) {
            logger().error("{}", r.error().message());
            return kExitFailure;
        }
        ++n_eval;
    }
    if (!stopped) pending += streamer.flush();
    if (!stopped) generated += pending;
    if (!o.json) std::cout << escape_text(stopped ? "" : pending, EscapeFor::Text) << "\n";
    const double eval_s = seconds_since(eval_start);
    if (interrupted())
        std::fprintf(stderr, "interrupted: stopped after %zu generated tokens\n",
                     tokens.size() - n_prompt);

    const double prompt_tps = static_cast<double>(n_prompt) / prompt_s;
    const double eval_tps = n_eval > 0 ? n_eval / eval_s : 0.0;
    std::fprintf(stderr, "prompt eval: %zu tokens, %.2f tok/s; eval: %d tokens, %.2f tok/s\n",
                 n_prompt, prompt_tps, n_eval, eval_tps);
    // What actually ran, from the registry's dispatch records.
    nlohmann::json kernels = nlohmann::json::array();
    uint64_t calls = 0, fallback_calls = 0;
    for (const RegistryEntry& e : ms->registry->seal().entries) {
        if (e.phase != Phase::Dispatch) continue;
        calls += e.count;
        if (e.outcome == Outcome::Miss) fallback_calls += e.count;
        kernels.push_back({{"backend", e.key.backend},
                           {"op", op_name(e.key.op)},
                           {"role", e.key.role},
                           {"kind", kind_name(e.key.kind)},
                           {"outcome", outcome_name(e.outcome)},
                           {"detail", e.detail},
                           {"calls", e.count}});
    }
    std::fprintf(stderr, "kernels: %llu calls, %llu through a fallback (run --json lists them)\n",
                 static_cast<unsigned long long>(calls),
                 static_cast<unsigned long long>(fallback_calls));
    if (o.profile && !o.json)
        std::fprintf(stderr,
                     "\nprofile, prompt (%zu tokens in one pass per %u):\n%s\nprofile, "
                     "generation (%d steps):\n%s",
                     n_prompt, m.max_batch(), render_profile(prompt_profile, prompt_s, 1).c_str(),
                     n_eval,
                     render_profile(profile, eval_s, static_cast<uint64_t>(n_eval)).c_str());
    if (o.json) {
        nlohmann::json doc{
            {"model", o.model_path},
            {"prompt_tokens", n_prompt},
            {"generated_tokens", tokens.size() - n_prompt},
            {"text", generated},
            {"tokens", std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(n_prompt),
                                            tokens.end())},
            {"prompt_tokens_per_s", prompt_tps},
            {"eval_tokens_per_s", eval_tps},
            {"kernels", kernels},
            {"resident", ms->model->residency().resident},
            {"residency",
             ms->model->residency().resident
                 ? "forward pass resident on " + ms->dispatcher->backends().front()->name()
                 : "activations in host memory: " + ms->model->residency().reason}};
        if (o.profile)
            doc["profile"] = {
                {"prompt", profile_json(prompt_profile, prompt_s, 1)},
                {"generation", profile_json(profile, eval_s, static_cast<uint64_t>(n_eval))}};
        if (interrupted()) doc["interrupted"] = true;
        print_json(std::move(doc));
    }
    return interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

Command add_run_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand("run", "Generate text from a prompt with a GGUF model");
    auto o = std::make_shared<RunOptions>();
    cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required();
    auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
    auto* file = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from this file");
    prompt->excludes(file);
    cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (default 128)")
        ->check(CLI::Range(0, std::numeric_limits<int>::max()));
    add_model_choices(*cmd, o->model);
    cmd->add_option("--seed", o->sampling.seed, "RNG seed (same seed, same output)")
        ->check(unsigned_digits());
    cmd->add_option("--temp", o->sampling.temperature, "Temperature; 0 = greedy (default 0.8)")
        ->check(finite_in(0, 100));
    cmd->add_option("--top-k", o->sampling.top_k, "Top-k, 0 = off (default 40)")
        ->check(unsigned_digits());
    cmd->add_option("--top-p", o->sampling.top_p, "Top-p, 1 = off (default 0.95)")
        ->check(finite_in(0, 1));
    cmd->add_option("--min-p", o->sampling.min_p, "Min-p, 0 = off (default 0.05)")
        ->check(finite_in(0, 1));
    cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty,
                    "Repetition penalty, 1 = off (default 1.0)")
        ->check(finite_in(0, 100, true));
    cmd->add_option("--repeat-last-n", o->sampling.repeat_last_n,
                    "Tokens the repetition penalty looks back over (default 64)")
        ->check(unsigned_digits());
    cmd->add_option("--stop", o->stops, "Stop when this text is generated (repeatable)");
    cmd->add_flag("--chat", o->chat,
                  "Wrap the prompt as one user turn in the chat template (the file's, or "
                  "--chat-template's, which implies --chat)");
    add_chat_options(*cmd, o->chat_options);
    cmd->add_flag("--json", o->json, "Print one JSON object at the end instead of streaming");
    cmd->add_flag("--profile", o->profile,
                  "Time every op of the forward pass (per op, tensor role and kind) and print "
                  "the table on stderr, prompt and generation apart (with --json: a \"profile\" "
                  "object)");
    return {cmd, [o, &common]() { return run(common, *o); }};
}

}  // namespace ferrox::cli
