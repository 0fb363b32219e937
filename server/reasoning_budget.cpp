#include "reasoning_budget.h"

#include <fmt/format.h>

#include <string>

#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace ferrox::server {

namespace {

constexpr const char* kBudgetField = "thinking_token_budget";   // vLLM
constexpr const char* kBudgetAlias = "thinking_budget_tokens";  // llama-server

// Whether every token of `marker` has text the stage's watch can see.
bool marker_visible(std::string_view marker, const Tokenizer& tokenizer,
                    const grammar::TokenTrie& vocab) {
    for (const int32_t id : tokenizer.encode(marker, false, true))
        if (id < 0 || static_cast<size_t>(id) >= vocab.vocab_size() || vocab.piece(id).empty())
            return false;
    return true;
}

}  // namespace

ReasoningBudgetParams read_reasoning_budget(Fields& body, const ParseInput& in, ChatFamily family,
                                            bool starts_in_reasoning) {
    if (body.has(kBudgetField) && body.has(kBudgetAlias))
        body.fail(kBudgetAlias,
                  fmt::format("and '{}' are one setting; send one of them", kBudgetField));
    const bool asked = body.has(kBudgetField) || body.has(kBudgetAlias);
    const char* name = body.has(kBudgetAlias) ? kBudgetAlias : kBudgetField;
    const int64_t budget =
        body.integer(name, -1, int64_t(in.max_positions), int64_t(in.reasoning_budget));
    ReasoningBudgetParams p;
    const ChatFamilyInfo& info = family_info(family);
    if (budget < 0 || info.reasoning_close.empty()) return p;
    const auto refuse = [&](const std::string& why) {
        if (asked) body.fail(name, why);
        return p;  // the server's default: not for this model
    };
    if (!in.grammar_vocab) return refuse("is not enforced by this server (no token trie)");
    if (!marker_visible(info.reasoning_start, in.tokenizer, *in.grammar_vocab) ||
        !marker_visible(info.reasoning_end, in.tokenizer, *in.grammar_vocab))
        return refuse(fmt::format(
            "is not enforced for the {} family (its reasoning markers are control tokens)",
            info.name));
    p.budget = budget;
    p.start = std::string(info.reasoning_start);
    p.end = std::string(info.reasoning_end);
    p.close_tokens = in.tokenizer.encode(info.reasoning_close, false, true);
    p.starts_inside = starts_in_reasoning;
    return p;
}

}  // namespace ferrox::server
