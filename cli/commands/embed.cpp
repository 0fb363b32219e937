// `ferrox embed`: one vector per input text from an embedding model (a
// decoder whose `<arch>.pooling_type` is mean, cls or last: Qwen3-Embedding),
// pooled as the file says and L2-normalised by default, as llama.cpp's
// llama-embedding does. Inputs are the --prompt flags, or else stdin's lines;
// many share each decode. Runs on the public C API (ferrox_embed).
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api_model.h"
#include "commands/commands.h"
#include "exit_status.h"
#include "ferrox/ferrox.h"
#include "ferrox/log.h"
#include "model_session.h"

namespace ferrox::cli {
namespace {

// Bounds on what stdin may hand over (each line one input): read whole, so
// its size is checked before any line is kept.
constexpr size_t kMaxInputs = 65536;
constexpr size_t kMaxStdinBytes = size_t{64} << 20;
constexpr uint32_t kDefaultContext = 4096;  // cells shared by one round's inputs
constexpr uint32_t kDefaultParallel = 16;   // inputs per decode at most

struct EmbedOptions {
    std::string model_path, normalize = "l2";
    std::vector<std::string> prompts;
    bool json = false;
    uint32_t parallel = kDefaultParallel;
    ModelChoices model;
};

Expected<std::vector<std::string>> stdin_lines() {
    std::string text;
    char chunk[1 << 16];
    while (std::cin.read(chunk, sizeof chunk) || std::cin.gcount() > 0) {
        const auto got = static_cast<size_t>(std::cin.gcount());
        if (text.size() + got > kMaxStdinBytes)
            return make_error("stdin: more than {} MiB (one input a line)", kMaxStdinBytes >> 20);
        text.append(chunk, got);
    }
    std::vector<std::string> lines;
    for (size_t start = 0; start < text.size();) {
        const size_t end = std::min(text.find('\n', start), text.size());
        if (lines.size() == kMaxInputs)
            return make_error("stdin: more than {} lines (one input each)", kMaxInputs);
        lines.emplace_back(text, start, end - start);
        start = end + 1;
    }
    return lines;
}

Expected<std::vector<int32_t>> tokens_of(ferrox_model* model, const std::string& text, bool special,
                                         ferrox_call_status& st) {
    std::vector<int32_t> tokens;
    size_t n = 0;
    const int parse = special ? 1 : 0;
    ferrox_code code =
        ferrox_tokenize(model, text.data(), text.size(), 1, parse, nullptr, 0, &n, &st);
    tokens.resize(n);
    if (code == FERROX_CODE_BUFFER_TOO_SMALL)
        code = ferrox_tokenize(model, text.data(), text.size(), 1, parse, tokens.data(),
                               tokens.size(), &n, &st);
    if (code != FERROX_CODE_OK) return make_error("{}", st.message);
    tokens.resize(n);
    return tokens;
}

int run(const CommonOptions& common, EmbedOptions o) {
    if (auto config = load_session_config(common); !config) {
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    std::vector<std::string> texts = o.prompts;
    if (texts.empty()) {
        auto lines = stdin_lines();
        if (!lines) {
            logger().error("embed: {}", lines.error().message());
            return kExitBadInput;
        }
        texts = std::move(*lines);
    }
    if (texts.empty()) {
        logger().error("embed: no input (give --prompt, or lines on stdin)");
        return kExitBadInput;
    }
    ModelChoices choices = o.model;
    choices.embeddings = true;
    choices.sequences = o.parallel;
    if (choices.context == 0) choices.context = kDefaultContext;
    ferrox_call_status st = fresh_status();
    const ApiModelParams params(common, choices);
    ferrox_model* raw_model = nullptr;
    const ferrox_code loaded =
        ferrox_model_load(o.model_path.c_str(), params.get(), &raw_model, &st);
    if (!succeeded(loaded, st)) return exit_status_of_load(loaded);
    const ModelHandle model(raw_model, ferrox_model_free);
    if (ferrox_model_pooling(model.get()) == FERROX_POOLING_NONE) {
        logger().error(
            "embed: {} is not an embedding model ('{}.pooling_type' is absent or 0: it has no "
            "pooled output); use an embedding model such as Qwen3-Embedding",
            o.model_path, ferrox_model_arch(model.get()));
        return kExitBadInput;
    }
    const uint32_t n_ctx = ferrox_model_n_ctx(model.get());
    std::vector<std::vector<int32_t>> inputs;
    for (size_t i = 0; i < texts.size(); ++i) {
        auto tokens = tokens_of(model.get(), texts[i], o.model.special, st);
        if (!tokens) {
            logger().error("embed: input {}: {}", i + 1, tokens.error().message());
            return kExitBadInput;
        }
        if (tokens->empty() || tokens->size() > n_ctx) {
            logger().error("embed: input {} is {} tokens; 1 to the context's {} fit (raise -c)",
                           i + 1, tokens->size(), n_ctx);
            return kExitBadInput;
        }
        inputs.push_back(std::move(*tokens));
    }
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    cp.n_seq = o.parallel;
    ferrox_context* raw_ctx = nullptr;
    if (!succeeded(ferrox_context_new(model.get(), &cp, &raw_ctx, &st), st)) return kExitFailure;
    const ContextHandle ctx(raw_ctx, ferrox_context_free);
    const uint32_t n_embd = ferrox_model_n_embd(model.get());
    std::vector<const int32_t*> pointers;
    std::vector<size_t> lengths;
    for (const auto& in : inputs) {
        pointers.push_back(in.data());
        lengths.push_back(in.size());
    }
    std::vector<float> out(inputs.size() * size_t{n_embd});
    if (!succeeded(ferrox_embed(ctx.get(), inputs.size(), pointers.data(), lengths.data(),
                                o.normalize == "l2" ? 1 : 0, out.data(), out.size(), &st),
                   st))
        return kExitFailure;
    if (o.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (size_t i = 0; i < inputs.size(); ++i)
            rows.push_back(
                std::vector<float>(out.begin() + static_cast<ptrdiff_t>(i * n_embd),
                                   out.begin() + static_cast<ptrdiff_t>((i + 1) * n_embd)));
        std::cout << rows.dump() << "\n";
    } else {
        for (size_t i = 0; i < inputs.size(); ++i) {
            std::string line;
            for (uint32_t j = 0; j < n_embd; ++j)
                line += fmt::format("{}{:.9g}", j ? " " : "", out[i * n_embd + j]);
            std::cout << line << "\n";
        }
    }
    return kExitOk;
}

}  // namespace

Command add_embed_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "embed", "One vector per input from an embedding model (--prompt, or stdin's lines)");
    auto o = std::make_shared<EmbedOptions>();
    cmd->add_option("-m,--model", o->model_path, "GGUF embedding model file")->required();
    cmd->add_option("-p,--prompt", o->prompts, "An input text (repeatable); else stdin's lines");
    cmd->add_option("--normalize", o->normalize, "l2 (unit vectors, the default) or none")
        ->check(CLI::IsMember({"l2", "none"}));
    cmd->add_flag("--json", o->json, "Print one JSON array of vectors instead of lines");
    cmd->add_option("--parallel", o->parallel, "Inputs per decode at most")
        ->check(CLI::Range(1, 64));
    add_model_choices(*cmd, o->model);
    return {cmd, [o, &common]() { return run(common, *o); }};
}

}  // namespace ferrox::cli
