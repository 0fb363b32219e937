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

ReasoningBudgetParams reasoning_budget_params(int64_t budget, const ParseInput& in,
                                              ChatFamily family, bool starts_in_reasoning,
                                              std::string& why_not) {
    ReasoningBudgetParams p;
    const ChatFamilyInfo& info = family_info(family);
    if (budget < 0 || info.reasoning_close.empty()) return p;
    if (!in.grammar_vocab) {
        why_not = "is not enforced by this server (no token trie)";
        return p;
    }
    if (!marker_visible(info.reasoning_start, in.tokenizer, *in.grammar_vocab.get()) ||
        !marker_visible(info.reasoning_end, in.tokenizer, *in.grammar_vocab.get())) {
        why_not = fmt::format(
            "is not enforced for the {} family (its reasoning markers are control tokens)",
            info.name);
        return p;
    }
    p.budget = budget;
    p.start = std::string(info.reasoning_start);
    p.end = std::string(info.reasoning_end);
    p.close_tokens = in.tokenizer.encode(info.reasoning_close, false, true);
    p.starts_inside = starts_in_reasoning;
    return p;
}

ReasoningBudgetParams read_reasoning_budget(Fields& body, const ParseInput& in, ChatFamily family,
                                            bool starts_in_reasoning) {
    if (body.has(kBudgetField) && body.has(kBudgetAlias))
        body.fail(kBudgetAlias,
                  fmt::format("and '{}' are one setting; send one of them", kBudgetField));
    const bool asked = body.has(kBudgetField) || body.has(kBudgetAlias);
    const char* name = body.has(kBudgetAlias) ? kBudgetAlias : kBudgetField;
    const int64_t budget =
        body.integer(name, -1, int64_t(in.max_positions), int64_t(in.reasoning_budget));
    std::string why_not;
    ReasoningBudgetParams p =
        reasoning_budget_params(budget, in, family, starts_in_reasoning, why_not);
    // The server's default that does not fit this model is no error of the request.
    if (!why_not.empty() && asked) body.fail(name, why_not);
    return p;
}

}  // namespace ferrox::server
