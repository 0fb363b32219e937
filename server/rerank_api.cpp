#include "rerank_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string_view>

#include "request_fields.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// A document as sent: a string, or an object whose `text` is one (Cohere's
// and Jina's object form); anything else is refused by pointer.
std::string document_text(const ordered_json& d, const std::string& pointer) {
    if (d.is_string()) return d.get<std::string>();
    if (!d.is_object()) refuse_field(pointer, "must be a string or an object with a 'text' string");
    Fields f(d, pointer);
    if (!f.has("text") || !f.raw("text").is_string())
        refuse_field(pointer + "/text", "must be a string");
    std::string text = f.raw("text").get<std::string>();
    f.refuse_the_rest();
    return text;
}

}  // namespace

std::vector<int32_t> rerank_tokens(const Tokenizer& tokenizer, const std::string& rerank_template,
                                   const std::string& query, const std::string& document) {
    if (!rerank_template.empty()) {
        // Both placeholders replaced in one pass over the template, so a
        // query holding "{document}" stays the user's text (llama-server
        // replaces {query} first, then {document} anywhere, the query's too).
        std::string prompt;
        std::string_view t = rerank_template;
        for (size_t at = 0;;) {
            const size_t q = t.find("{query}", at), d = t.find("{document}", at);
            const size_t hit = std::min(q, d);
            if (hit == std::string_view::npos) {
                prompt.append(t.substr(at));
                break;
            }
            prompt.append(t.substr(at, hit - at));
            prompt.append(hit == q ? query : document);
            at = hit + (hit == q ? std::string_view("{query}").size()
                                 : std::string_view("{document}").size());
        }
        return tokenizer.encode(prompt, false, true);
    }
    const PairSpecials specials = tokenizer.pair_specials();
    const auto append = [](std::vector<int32_t>& out, const std::vector<int32_t>& part) {
        out.insert(out.end(), part.begin(), part.end());
    };
    std::vector<int32_t> out = specials.before;
    append(out, tokenizer.encode(query, false, false));
    append(out, specials.between);
    append(out, tokenizer.encode(document, false, false));
    append(out, specials.after);
    return out;
}

RerankRequest parse_rerank_request(const ordered_json& body, const Tokenizer& tokenizer,
                                   const std::string& rerank_template, const RerankLimits& limits) {
    RerankRequest r;
    Fields f(body, "");
    (void)f.string("model", "");  // one model is served, whatever the client names
    if (!f.has("query")) refuse_field("/query", "is required");
    const ordered_json& query = f.raw("query");
    if (!query.is_string()) refuse_field("/query", "must be a string");
    if (!f.has("documents")) refuse_field("/documents", "is required");
    const ordered_json& documents = f.raw("documents");
    if (!documents.is_array() || documents.empty())
        refuse_field("/documents",
                     "must be a non-empty array of strings or {\"text\": ...} objects");
    if (documents.size() > limits.max_documents)
        refuse_field("/documents", fmt::format("has {} entries; at most {} are accepted",
                                               documents.size(), limits.max_documents));
    r.top_n = documents.size();
    if (f.has("top_n")) {
        const ordered_json& n = f.raw("top_n");
        if (!n.is_number_integer() || n.get<int64_t>() < 1)
            refuse_field("/top_n", "must be an integer of at least 1");
        r.top_n = std::min<size_t>(r.top_n, n.get<uint64_t>());
    }
    if (f.has("return_documents")) {
        if (!f.raw("return_documents").is_boolean())
            refuse_field("/return_documents", "must be true or false");
        r.return_documents = f.raw("return_documents").get<bool>();
    }
    f.refuse_the_rest();
    const std::string q = query.get<std::string>();
    for (size_t i = 0; i < documents.size(); ++i) {
        const std::string pointer = fmt::format("/documents/{}", i);
        std::string text = document_text(documents[i], pointer);
        std::vector<int32_t> tokens = rerank_tokens(tokenizer, rerank_template, q, text);
        if (tokens.empty()) refuse_field(pointer, "and the query make no tokens");
        if (tokens.size() > limits.max_tokens)
            refuse_field(pointer,
                         fmt::format("with the query is {} tokens; a pair may have at most {} "
                                     "(the reranker's context)",
                                     tokens.size(), limits.max_tokens));
        r.prompt_tokens += tokens.size();
        if (r.prompt_tokens > limits.max_total_tokens)
            refuse_field("/documents", fmt::format("make more than {} tokens with the query; send "
                                                   "fewer or shorter documents",
                                                   limits.max_total_tokens));
        r.inputs.push_back(std::move(tokens));
        r.documents.push_back(std::move(text));
    }
    return r;
}

ordered_json rerank_response(const std::vector<std::vector<float>>& scores,
                             const RerankRequest& request, const std::string& model_id) {
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const auto score = [&](size_t i) { return scores[i].empty() ? 0.0f : scores[i][0]; };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score(a) > score(b); });
    ordered_json results = ordered_json::array();
    for (size_t k = 0; k < std::min(request.top_n, order.size()); ++k) {
        const size_t i = order[k];
        ordered_json item = {{"index", i}, {"relevance_score", score(i)}};
        if (request.return_documents) item["document"] = {{"text", request.documents[i]}};
        results.push_back(std::move(item));
    }
    return {{"model", model_id},
            {"object", "list"},
            {"usage",
             {{"prompt_tokens", request.prompt_tokens}, {"total_tokens", request.prompt_tokens}}},
            {"results", std::move(results)}};
}

}  // namespace ferrox::server
