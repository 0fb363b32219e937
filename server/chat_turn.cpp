#include "chat_turn.h"

#include <fmt/format.h>

#include <functional>

#include "ferrox/tokenizer/tokenizer.h"
#include "tool_call_grammar.h"

namespace ferrox::server {

using nlohmann::ordered_json;

ChatTurn start_chat_turn(const ordered_json& messages, const ChatToolFields& tools,
                         const ParseInput& in, uint64_t id_seed, const char* field) {
    const DetectedChatFamily& family = in.render_chat.family();
    auto rendered = in.render_chat(messages, tools.tools, tools.kwargs);
    if (!rendered) throw ApiError{400, rendered.error().message(), field};
    ChatTurn turn;
    ChatParseOptions options;
    options.starts_in_reasoning = reasoning_open_in_prompt(family.family, rendered->text);
    options.id_seed = id_seed;
    // Parameters a family writes as bare text are read back as text, not JSON.
    if (tools.reads_calls()) options.text_parameters = text_parameters(family.family, tools);
    turn.answer.emplace(answer_family(family.family, tools.reads_calls()), options);
    if (tools.choice.mode == ToolChoice::Mode::Required ||
        tools.choice.mode == ToolChoice::Mode::Named)
        turn.forced_call = tool_call_grammar(family, tools, options.starts_in_reasoning);
    else if (tools.reads_calls() && in.grammar_vocab)
        turn.lazy_call = lazy_tool_call_grammar(family, tools, options.starts_in_reasoning,
                                                in.tokenizer, *in.grammar_vocab.get());
    turn.starts_in_reasoning = options.starts_in_reasoning;
    turn.prompt = std::move(rendered->tokens);
    return turn;
}

void force_tool_call(std::shared_ptr<const grammar::Grammar> forced, const ParseInput& in,
                     GenerationRequest& g, const char* field, bool grammar_is_format) {
    if (!forced) return;
    if (g.sampling.grammar && !grammar_is_format)
        throw ApiError{
            400, fmt::format("'{}' forcing a call and a grammar exclude each other", field), field};
    if (!in.grammar_vocab)
        throw ApiError{400, "this server takes no grammars (no token trie)", field};
    g.sampling.grammar = std::move(forced);
    g.sampling.grammar_vocab = in.grammar_vocab.get();
}

void arm_lazy_tool_call(LazyGrammarParams lazy, const ParseInput& in, GenerationRequest& g) {
    if (!lazy.grammar || g.sampling.grammar) return;
    g.sampling.lazy = std::move(lazy);
    g.sampling.grammar_vocab = in.grammar_vocab.get();
}

size_t reasoning_tokens(const ChatAnswer& answer, const Tokenizer& tokenizer) {
    if (answer.reasoning().empty()) return 0;
    return tokenizer.encode(answer.reasoning(), false, false).size();
}

}  // namespace ferrox::server
