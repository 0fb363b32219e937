// `ferrox logits`: teacher-forced logits at every position, raw float32
// [n_tokens x vocab], for parity tests against another engine. Runs on the
// public C API (ferrox/ferrox.h).
#include <algorithm>
#include <iostream>
#include <memory>
#include <span>
#include <sstream>
#include <vector>

#include "api_model.h"
#include "commands/commands.h"
#include "ferrox/ferrox.h"
#include "ferrox/log.h"
#include "model_session.h"
#include "output.h"

namespace ferrox::cli {
namespace {

struct LogitsOptions {
    std::string model_path, tokens_csv, prompt, out_path;
    ModelChoices model;
};

Expected<std::vector<int32_t>> parse_tokens(const std::string& csv) {
    std::vector<int32_t> ids;
    std::stringstream in(csv);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            size_t used = 0;
            const long v = std::stol(item, &used);
            if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
            ids.push_back(static_cast<int32_t>(v));
        } catch (const std::exception&) {
            return make_error("--tokens: '{}' (item {}) is not a token id", item, ids.size() + 1);
        }
    }
    if (ids.empty()) return make_error("--tokens: no token ids given");
    return ids;
}

// Through ferrox.h, as any program would: the CLI is the C API's first user.
int run(const CommonOptions& common, const LogitsOptions& o) {
    if (o.model.special && !o.tokens_csv.empty())
        return usage_error("--special", "--tokens are ids already; it applies to --prompt only");
    // The configuration's log level (the API reads the file again for the rest).
    if (auto config = load_session_config(common); !config) {
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    // The flags before the model: a malformed --tokens is refused without a load.
    std::vector<int32_t> tokens;
    if (!o.tokens_csv.empty()) {
        auto ids = parse_tokens(o.tokens_csv);
        if (!ids) {
            logger().error("{}", ids.error().message());
            return kExitBadInput;
        }
        tokens = std::move(*ids);
    }
    ferrox_call_status st = fresh_status();
    const ApiModelParams params(common, o.model);
    ferrox_model* raw_model = nullptr;
    const ferrox_code loaded =
        ferrox_model_load(o.model_path.c_str(), params.get(), &raw_model, &st);
    if (!succeeded(loaded, st)) return exit_status_of_load(loaded);
    const ModelHandle model(raw_model, ferrox_model_free);
    const uint32_t n_ctx = ferrox_model_n_ctx(model.get());  // the engine's rule, and its warning

    if (!o.tokens_csv.empty()) {
        // An id the model has no row for is the caller's mistake, like a malformed one.
        const uint32_t vocab = ferrox_model_vocab(model.get());
        for (size_t i = 0; i < tokens.size(); ++i)
            if (static_cast<uint32_t>(tokens[i]) >= vocab) {
                logger().error("--tokens: {} (item {}) is outside the vocabulary of {} tokens",
                               tokens[i], i + 1, vocab);
                return kExitBadInput;
            }
    } else {
        // Text in the prompt stays text unless --special asks for control tokens.
        const int parse = o.model.special ? 1 : 0;
        size_t n = 0;
        ferrox_code code = ferrox_tokenize(model.get(), o.prompt.data(), o.prompt.size(), 1, parse,
                                           nullptr, 0, &n, &st);
        tokens.resize(n);
        if (code == FERROX_CODE_BUFFER_TOO_SMALL)
            code = ferrox_tokenize(model.get(), o.prompt.data(), o.prompt.size(), 1, parse,
                                   tokens.data(), tokens.size(), &n, &st);
        if (!succeeded(code, st)) return kExitBadInput;
    }
    if (tokens.size() > n_ctx) {
        logger().error("{} tokens do not fit the context of {}; raise -c", tokens.size(), n_ctx);
        return kExitBadInput;
    }
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    ferrox_context* raw_ctx = nullptr;
    if (!succeeded(ferrox_context_new(model.get(), &cp, &raw_ctx, &st), st)) return kExitFailure;
    const ContextHandle ctx(raw_ctx, ferrox_context_free);
    const uint32_t vocab = ferrox_model_vocab(model.get());
    // Chunks of the context's n_batch (the model's max_batch, 256), as
    // Model::forward runs a prompt: the same products, the same logits. Each
    // row goes from the context's own logits straight to the file, so n x vocab
    // floats (128 GiB for a 128K context of a 256K vocabulary) are never held.
    const size_t chunk = 256;
    auto written = write_file_atomically(o.out_path, o.model_path, [&](const ByteSink& sink) {
        for (size_t start = 0; start < tokens.size(); start += chunk) {
            const size_t n = std::min(chunk, tokens.size() - start);
            if (decode_one_sequence(ctx.get(), tokens, start, n, LogitsFor::All, st) !=
                FERROX_CODE_OK)
                return Expected<void>(make_error("{}", st.message));
            for (uint32_t i = 0; i < n; ++i) {
                const float* row = nullptr;
                if (ferrox_logits(ctx.get(), i, &row, &st) != FERROX_CODE_OK)
                    return Expected<void>(make_error("{}", st.message));
                if (!sink(std::as_bytes(std::span<const float>(row, vocab))))
                    return Expected<void>();  // errno reported by the writer
            }
        }
        return Expected<void>();
    });
    if (!written) {
        logger().error("{}", written.error().message());
        return kExitFailure;
    }
    std::cerr << fmt::format("wrote {} x {} float32 logits to {} (tokens: {})\n", tokens.size(),
                             vocab, shown(o.out_path), fmt::join(tokens, ","));
    return kExitOk;
}

}  // namespace

Command add_logits_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "logits", "Write teacher-forced logits at every position as raw float32 [n x vocab]");
    auto o = std::make_shared<LogitsOptions>();
    cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required();
    auto* tokens = cmd->add_option("--tokens", o->tokens_csv, "Token ids, comma-separated");
    auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize (with BOS)");
    tokens->excludes(prompt);
    cmd->add_option("--out", o->out_path, "Output file")->required();
    add_model_choices(*cmd, o->model);
    return {cmd, [o, &common]() {
                if (o->tokens_csv.empty() && o->prompt.empty()) {
                    logger().error("logits: give --tokens or --prompt");
                    return kExitBadInput;
                }
                return run(common, *o);
            }};
}

}  // namespace ferrox::cli
