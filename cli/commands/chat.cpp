// `ferrox chat`: a multi-turn conversation with a GGUF model, llama-cli style.
// Every turn renders the whole conversation through the chat template, keeps
// the KV cache for the tokens it shares with what the cache already holds, and
// prefills only the rest. A recurrent model (qwen35) cannot drop a tail, so
// the state at each prompt's end is kept (a checkpoint): a turn whose prompt
// leaves the cached tokens (the template re-renders an answer otherwise than
// it was generated) rewinds to the last prompt end inside the shared prefix
// instead of starting over. On a terminal: a "> " prompt, streaming answers,
// Ctrl-C stops an answer (a second Ctrl-C, or one at the prompt, exits). When
// stdin is not a terminal: one message per line, each answer on stdout then a
// newline -- so a script or a test can drive it. Reasoning (the template
// family's <think> block or harmony analysis channel) is shown apart from the
// answer: dimmed on a terminal, on stderr otherwise.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_prompt.h"
#include "commands/commands.h"
#include "ferrox/chat_format/family.h"
#include "ferrox/chat_format/stream_parser.h"
#include "ferrox/escape.h"
#include "ferrox/log.h"
#include "ferrox/model/context.h"
#include "ferrox/output/sequence_output.h"
#include "ferrox/sampler_chain.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "model_reference.h"
#include "model_session.h"
#include "output.h"
#include "sampler_flags.h"

namespace ferrox::cli {
namespace {

struct ChatCommandOptions {
    std::string model_path, system_prompt;
    int n_predict = -1;  // per answer; -1: until end of turn or a full context
    ModelChoices model;
    SamplerParams sampling;
    GrammarFlags grammar;
    ModelSourceFlags source;
    std::shared_ptr<const grammar::Grammar> parsed_grammar;  // from `grammar`, when given
    ChatOptions chat;
};

// The chain every answer draws with: the grammar (when given) first, over
// the tokenizer's bytes.
SamplerChain answer_chain(const ChatCommandOptions& o, const Tokenizer& tok) {
    ChainParams p;
    p.base = o.sampling;
    if (o.parsed_grammar) {
        p.grammar = o.parsed_grammar;
        p.grammar_vocab = grammar::TokenTrie::from_tokenizer(tok);
    }
    return SamplerChain::from_params(p);
}

// Ctrl-C: while an answer streams, the first stops it; otherwise it exits.
std::atomic<bool> g_generating{false};
std::atomic<bool> g_stop_answer{false};

void on_chat_sigint(int) {
    if (g_generating.load() && !g_stop_answer.load()) {
        g_stop_answer.store(true);
        return;
    }
    constexpr char kBye[] = "\n";
    (void)!::write(STDERR_FILENO, kBye, sizeof kBye - 1);
    ::_exit(130);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

// The last prompt ends a recurrent model's conversation keeps the state of
// (each as large as the model's recurrent state: ~50 MiB for Qwen3.5-4B).
constexpr size_t kPromptEnds = 4;

class Conversation {
  public:
    Conversation(model::Model& m, std::unique_ptr<model::Context> ctx, const Tokenizer& tok,
                 ChatRenderer renderer, const ChatCommandOptions& o, bool interactive)
        : m_(m),
          ctx_(std::move(ctx)),
          tok_(tok),
          renderer_(std::move(renderer)),
          o_(o),
          sampler_(answer_chain(o, tok)),
          interactive_(interactive),
          dim_(::isatty(STDOUT_FILENO) == 1),
          family_(detect_family(renderer_.chat_template().source()).family),
          logits_(m.vocab()) {
        clear();
    }

    void clear() {
        messages_ = nlohmann::ordered_json::array();
        if (!o_.system_prompt.empty())
            messages_.push_back({{"role", "system"}, {"content", o_.system_prompt}});
        // The cache keeps its contents; the next prefill's common prefix decides what is reused.
    }

    // One user turn: false when the run must end (a forward pass failed).
    bool turn(const std::string& user) {
        messages_.push_back({{"role", "user"}, {"content", user}});
        auto prompt = renderer_.render(messages_, true);
        if (!prompt) {
            logger().error("{}", prompt.error().message());
            messages_.erase(messages_.end() - 1);
            return true;
        }
        std::vector<int32_t> tokens = std::move(prompt->tokens);
        if (tokens.empty() || tokens.size() >= m_.context()) {
            logger().error(
                "the conversation ({} tokens) no longer fits the context ({}); /clear "
                "starts over, -c raises it",
                tokens.size(), m_.context());
            messages_.erase(messages_.end() - 1);
            return true;
        }
        // Reuse what the cache holds; at least the last token runs, for its logits.
        size_t keep = common_prefix(cached_, tokens);
        if (keep == tokens.size()) --keep;
        if (keep < cached_.size()) keep = take_back(keep);
        if (o_.chat.verbose_prompt) {
            print_verbose_prompt(ChatPrompt{prompt->text, tokens, {}});
            std::fprintf(stderr, "prefill: %zu new tokens, %zu reused from the cache\n",
                         tokens.size() - keep, keep);
        }
        const std::span<const int32_t> fresh(tokens.data() + keep, tokens.size() - keep);
        if (!forward(fresh, keep)) return false;
        cached_ = tokens;
        keep_prompt_end();

        std::string answer;
        output::SequenceOutput out(tok_, {});
        ChatParseOptions parse_options;
        parse_options.starts_in_reasoning = reasoning_open_in_prompt(family_, prompt->text);
        ChatStreamParser parser(family_, parse_options);
        in_reasoning_ = false;
        // The repetition penalty sees this turn's whole conversation; the
        // random stream goes on from the last turn (one seed per session).
        sampler_.clear_history();
        sampler_.accept(tokens);
        g_stop_answer.store(false);
        g_generating.store(true);
        for (int i = 0; o_.n_predict < 0 || i < o_.n_predict; ++i) {
            if (g_stop_answer.load()) break;
            const int32_t next = sampler_.sample(logits_);
            if (next < 0) {  // the grammar allows nothing (its error says why)
                g_generating.store(false);
                logger().error("{}", sampler_.error());
                return false;
            }
            const auto step = out.push(next);
            emit(step.text, answer, parser);
            if (step.finish == output::FinishReason::EndOfGeneration) break;
            sampler_.accept(next);
            tokens.push_back(next);
            if (tokens.size() >= m_.context()) {
                logger().warn("the context is full ({} tokens); the answer stops here",
                              m_.context());
                break;
            }
            if (!forward(std::span<const int32_t>(&tokens.back(), 1), tokens.size() - 1)) {
                g_generating.store(false);
                return false;
            }
            cached_.push_back(next);
        }
        g_generating.store(false);
        const bool cancelled = g_stop_answer.load();
        emit(out.finish(cancelled ? output::FinishReason::Cancelled : output::FinishReason::Length)
                 .text,
             answer, parser);
        std::vector<ChatEvent> events;
        if (auto done = parser.finish(events); !done) logger().warn("{}", done.error().message());
        show(events);
        if (in_reasoning_ && !dim_) std::cerr << "\n" << std::flush;
        std::cout << "\n" << std::flush;
        if (cancelled && interactive_) std::fprintf(stderr, "[answer stopped]\n");
        messages_.push_back({{"role", "assistant"}, {"content", answer}});
        return true;
    }

  private:
    // Runs `tokens` at positions pos.. in calls of the context's batch; the
    // last one's logits into logits_. False (logged) when a call fails.
    bool forward(std::span<const int32_t> tokens, size_t pos) {
        for (size_t start = 0; start < tokens.size();) {
            const size_t n = std::min<size_t>(ctx_->batch(), tokens.size() - start);
            const bool last = start + n == tokens.size();
            model::Batch batch;
            for (size_t i = 0; i < n; ++i)
                batch.add(tokens[start + i], static_cast<int32_t>(pos + start + i), {0},
                          last && i + 1 == n);
            if (auto r =
                    ctx_->decode_into(batch, last ? std::span<float>(logits_) : std::span<float>());
                !r) {
                logger().error("{}", r.message);
                return false;
            }
            start += n;
        }
        return true;
    }

    // The cache back to at most `keep` positions: the tail dropped, or on a
    // recurrent model rewound to the last prompt end at or below `keep`
    // (without one, emptied). The positions it then holds; 0 also when a
    // sequence operation failed (logged), with the cache emptied.
    size_t take_back(size_t keep) {
        if (!m_.recurrent()) {
            if (ctx_->seq_remove(0, static_cast<int32_t>(keep), -1))
                return cached_.resize(keep), keep;
        } else {
            while (!prompt_ends_.empty() && prompt_ends_.back().first > keep)
                prompt_ends_.pop_back();
            if (!prompt_ends_.empty() && ctx_->seq_rewind(0, prompt_ends_.back().second)) {
                cached_.resize(prompt_ends_.back().first);
                return cached_.size();
            }
        }
        (void)ctx_->seq_remove(0, 0, -1);
        cached_.clear();
        prompt_ends_.clear();
        return 0;
    }

    // A recurrent model's state now, at the prompt's end, for a later turn.
    void keep_prompt_end() {
        if (!m_.recurrent()) return;
        auto state = ctx_->seq_checkpoint(0);
        if (!state) return logger().warn("chat: no checkpoint: {}", state.error().message());
        if (prompt_ends_.size() == kPromptEnds) prompt_ends_.erase(prompt_ends_.begin());
        prompt_ends_.emplace_back(cached_.size(), std::move(*state));
    }

    // The raw answer is kept for the conversation (the template drops the
    // reasoning itself, and the cache then matches what was generated).
    void emit(const std::string& piece, std::string& answer, ChatStreamParser& parser) {
        answer += piece;
        std::vector<ChatEvent> events;
        if (auto fed = parser.feed(piece, events); !fed) {
            logger().warn("{}", fed.error().message());
            return;
        }
        show(events);
    }

    std::string shown_text(const std::string& text) const {
        return interactive_ || dim_ ? escape_text(text, EscapeFor::Text) : text;
    }

    void show(const std::vector<ChatEvent>& events) {
        for (const ChatEvent& e : events) {
            if (e.kind == ChatEvent::Kind::Reasoning) {
                in_reasoning_ = true;
                // Escaped before the colour, so the model's bytes cannot end it.
                if (dim_)
                    std::cout << "\x1b[2m" << escape_text(e.text, EscapeFor::Text) << "\x1b[0m";
                else
                    std::cerr << e.text;
                continue;
            }
            if (in_reasoning_) {  // the answer starts on a line of its own
                in_reasoning_ = false;
                (dim_ ? std::cout : std::cerr) << "\n";
            }
            if (e.kind == ChatEvent::Kind::Content)
                std::cout << shown_text(e.text);
            else if (e.kind == ChatEvent::Kind::ToolCallStart)
                std::cout << "[tool call " << shown_text(e.name) << " ";
            else
                std::cout << shown_text(e.text) << "]";
        }
        std::cout << std::flush;
        std::cerr << std::flush;
    }

    model::Model& m_;
    std::unique_ptr<model::Context> ctx_;  // one sequence: the conversation's
    const Tokenizer& tok_;
    ChatRenderer renderer_;
    const ChatCommandOptions& o_;
    SamplerChain sampler_;
    bool interactive_;
    bool dim_;  // stdout is a terminal: reasoning is dimmed there
    ChatFamily family_;
    bool in_reasoning_ = false;
    std::vector<float> logits_;
    nlohmann::ordered_json messages_;
    std::vector<int32_t> cached_;  // the tokens whose K/V the cache holds, in order
    // Recurrent models: (position, checkpoint) at the last prompts' ends, oldest first.
    std::vector<std::pair<size_t, std::vector<std::byte>>> prompt_ends_;
};

int run(const CommonOptions& common, ChatCommandOptions o) {
    if (const int status = resolve_model_argument(o.model_path, o.source, "--model");
        status != kExitOk)
        return status;
    if (o.model.special)
        return usage_error("--special",
                           "a chat message is never read for control tokens (the "
                           "template's own text is); leave the flag out");
    const bool interactive = ::isatty(STDIN_FILENO) == 1;
    auto parsed = load_grammar(o.grammar);
    if (!parsed) {
        logger().error("{}", parsed.error().message());
        return kExitBadInput;
    }
    o.parsed_grammar = std::move(*parsed);
    OpenFailure why = OpenFailure::None;
    auto engine = open_engine(common, o.model_path, o.model, &why);
    if (!engine) {
        logger().error("{}", engine.error().message());
        return exit_status(why);
    }
    Engine& e = **engine;
    const Tokenizer& tok = e.tokenizer();  // built before the weights were mapped
    auto chosen = choose_chat_template(e.file(), o.chat.chat_template);
    if (!chosen) {
        logger().error("{}", chosen.error().message());
        return kExitBadInput;
    }
    model::ContextOptions co = e.context_options();
    co.sequences = 1;
    co.available_bytes = e.model().capacity().available_bytes;  // what the load's plan saw
    auto ctx = model::Context::create(e.model(), co);
    if (!ctx) {
        logger().error("{}", ctx.error().message());
        return kExitFailure;
    }
    Conversation conv(e.model(), std::move(*ctx), tok,
                      ChatRenderer(std::move(*chosen), e.file(), tok), o, interactive);

    struct sigaction action {
    }, previous{};
    action.sa_handler = on_chat_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous);
    if (interactive)
        std::fprintf(stderr,
                     "chat with %s: /exit ends, /clear starts over, Ctrl-C stops an answer\n",
                     shown(o.model_path).c_str());
    int code = kExitOk;
    std::string line;
    while (true) {
        if (interactive) std::cout << "> " << std::flush;
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line == "/exit" || line == "/quit") break;
        if (line == "/clear") {
            conv.clear();
            if (interactive) std::fprintf(stderr, "[conversation cleared]\n");
            continue;
        }
        if (line.empty()) continue;
        if (!conv.turn(line)) {
            code = kExitFailure;
            break;
        }
        if (!stdout_ok()) break;  // main() reports the write error
    }
    sigaction(SIGINT, &previous, nullptr);
    return code;
}

}  // namespace

Command add_chat_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "chat",
        "Talk with a GGUF model, turn by turn (one message per line when stdin is not a terminal)");
    auto o = std::make_shared<ChatCommandOptions>();
    cmd->add_option("-m,--model", o->model_path,
                    "GGUF model file, or a stored model reference (hf://OWNER/REPO/FILE.gguf, "
                    "OWNER/REPO:QUANT; --pull fetches it)")
        ->required();
    add_model_source_flags(*cmd, o->source);
    cmd->add_option("--sys,--system-prompt", o->system_prompt,
                    "System prompt (also -sys, as llama-cli spells it)");
    add_n_predict_flag(*cmd, o->n_predict, NPredict::PerAnswer);
    add_model_choices(*cmd, o->model);
    add_sampler_flags(*cmd, o->sampling);
    add_grammar_flags(*cmd, o->grammar);
    add_chat_options(*cmd, o->chat);
    return {cmd, [o, &common]() { return run(common, *o); }};
}

}  // namespace ferrox::cli
