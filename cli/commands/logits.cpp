// `ferrox logits`: teacher-forced logits at every position, raw float32
// [n_tokens x vocab], for parity tests against another engine.
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands/commands.h"
#include "ferrox/log.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "model_session.h"

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

int run(const CommonOptions& common, const LogitsOptions& o) {
    auto ms = open_model(common, o.model_path, o.model);
    if (!ms) {
        logger().error("{}", ms.error().message());
        return kExitBadInput;
    }
    std::vector<int32_t> tokens;
    if (!o.tokens_csv.empty()) {
        auto ids = parse_tokens(o.tokens_csv);
        if (!ids) {
            logger().error("{}", ids.error().message());
            return kExitBadInput;
        }
        tokens = std::move(*ids);
    } else {
        tokens = ms->tokenizer->encode(o.prompt, true, o.model.special);
    }
    model::Model& m = *ms->model;
    if (tokens.size() > m.context()) {
        logger().error("{} tokens do not fit the context of {}; raise -c", tokens.size(),
                       m.context());
        return kExitBadInput;
    }
    std::vector<float> logits(tokens.size() * m.vocab());
    if (auto r = m.forward(tokens, 0, logits); !r) {
        logger().error("{}", r.error().message());
        return kExitFailure;
    }
    std::ofstream out(o.out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()),
              static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!out) {
        logger().error("{}: cannot write the logits", o.out_path);
        return kExitFailure;
    }
    std::cerr << fmt::format("wrote {} x {} float32 logits to {} (tokens: {})\n", tokens.size(),
                             m.vocab(), o.out_path, fmt::join(tokens, ","));
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
