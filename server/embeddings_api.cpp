#include "embeddings_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "ferrox/model/embed.h"
#include "request_fields.h"

namespace ferrox::server {

using nlohmann::ordered_json;

namespace {

// One input's token ids as sent, each checked against the vocabulary.
std::vector<int32_t> token_array(const ordered_json& list, const std::string& pointer,
                                 size_t vocab) {
    std::vector<int32_t> ids;
    ids.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
        const ordered_json& t = list[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
            static_cast<uint64_t>(t.get<int64_t>()) >= vocab)
            refuse_field(fmt::format("{}/{}", pointer, i),
                         fmt::format("is not a token id (0 to {})", vocab - 1));
        ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return ids;
}

void check_length(const std::vector<int32_t>& tokens, const std::string& pointer,
                  const EmbeddingsLimits& limits) {
    if (tokens.empty()) refuse_field(pointer, "is empty: an input needs at least one token");
    if (tokens.size() > limits.max_tokens)
        refuse_field(pointer,
                     fmt::format("is {} tokens; an input may have at most {} (the embedding "
                                 "context)",
                                 tokens.size(), limits.max_tokens));
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const ordered_json& body, const Tokenizer& tokenizer,
                                           const EmbeddingsLimits& limits) {
    EmbeddingsRequest r;
    Fields f(body, "");
    (void)f.string("model", "");  // one model is served, whatever the client names
    (void)f.string("user", "");   // an end-user id for abuse tracking; nothing to do with it
    const std::string format = f.string("encoding_format", "float");
    if (format != "float" && format != "base64")
        refuse_field("/encoding_format",
                     fmt::format("must be 'float' or 'base64', not '{}'", format));
    r.base64 = format == "base64";
    r.dimensions = limits.n_embd;
    if (f.has("dimensions")) {
        const ordered_json& d = f.raw("dimensions");
        if (!d.is_number_integer() || d.get<int64_t>() < 1 ||
            d.get<int64_t>() > static_cast<int64_t>(limits.n_embd))
            refuse_field("/dimensions",
                         fmt::format("must be an integer from 1 to the model's {}", limits.n_embd));
        r.dimensions = static_cast<uint32_t>(d.get<int64_t>());
        if (r.dimensions != limits.n_embd && !limits.truncatable)
            refuse_field(
                "/dimensions",
                fmt::format("asks for {} of the model's {} dimensions, but this model is not "
                            "served as truncatable (Matryoshka); start the server with "
                            "--embedding-truncation if it was trained for it",
                            r.dimensions, limits.n_embd));
    }
    if (!f.has("input")) refuse_field("/input", "is required");
    const ordered_json& input = f.raw("input");
    f.refuse_the_rest();
    const size_t vocab = tokenizer.vocab_size();
    const auto text_input = [&](const ordered_json& s, const std::string& pointer) {
        auto tokens = tokenizer.encode(s.get<std::string>(), true, false);
        check_length(tokens, pointer, limits);
        return tokens;
    };
    if (input.is_string()) {
        if (input.get_ref<const std::string&>().empty())
            refuse_field("/input", "is an empty string");
        r.inputs.push_back(text_input(input, "/input"));
    } else if (input.is_array()) {
        if (input.empty()) refuse_field("/input", "is an empty array");
        if (input.size() > limits.max_inputs)
            refuse_field("/input", fmt::format("has {} entries; at most {} are accepted",
                                               input.size(), limits.max_inputs));
        if (input[0].is_number()) {  // one input as token ids
            auto tokens = token_array(input, "/input", vocab);
            check_length(tokens, "/input", limits);
            r.inputs.push_back(std::move(tokens));
        } else {
            for (size_t i = 0; i < input.size(); ++i) {
                const std::string pointer = fmt::format("/input/{}", i);
                const ordered_json& e = input[i];
                if (e.is_string()) {
                    if (e.get_ref<const std::string&>().empty())
                        refuse_field(pointer, "is an empty string");
                    r.inputs.push_back(text_input(e, pointer));
                } else if (e.is_array()) {
                    auto tokens = token_array(e, pointer, vocab);
                    check_length(tokens, pointer, limits);
                    r.inputs.push_back(std::move(tokens));
                } else {
                    refuse_field(pointer, "must be a string or an array of token ids");
                }
            }
        }
    } else {
        refuse_field("/input", "must be a string, an array of strings, or token ids");
    }
    for (const auto& in : r.inputs) r.prompt_tokens += in.size();
    return r;
}

std::string base64_floats(std::span<const float> v) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<unsigned char> bytes(v.size() * 4);
    for (size_t i = 0; i < v.size(); ++i) {
        const auto u = std::bit_cast<uint32_t>(v[i]);
        for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(u >> (8 * b));
    }
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t group = uint32_t{bytes[i]} << 16;
        if (n > 1) group |= uint32_t{bytes[i + 1]} << 8;
        if (n > 2) group |= bytes[i + 2];
        out += kAlphabet[group >> 18 & 63];
        out += kAlphabet[group >> 12 & 63];
        out += n > 1 ? kAlphabet[group >> 6 & 63] : '=';
        out += n > 2 ? kAlphabet[group & 63] : '=';
    }
    return out;
}

ordered_json embeddings_response(std::vector<std::vector<float>> vectors,
                                 const EmbeddingsRequest& request, const std::string& model_id) {
    ordered_json data = ordered_json::array();
    for (size_t i = 0; i < vectors.size(); ++i) {
        std::vector<float>& v = vectors[i];
        if (v.size() > request.dimensions) v.resize(request.dimensions);
        model::normalize_l2(v);
        ordered_json item = {{"object", "embedding"}, {"index", i}};
        if (request.base64)
            item["embedding"] = base64_floats(v);
        else
            item["embedding"] = v;
        data.push_back(std::move(item));
    }
    return {{"object", "list"},
            {"data", std::move(data)},
            {"model", model_id},
            {"usage",
             {{"prompt_tokens", request.prompt_tokens}, {"total_tokens", request.prompt_tokens}}}};
}

}  // namespace ferrox::server
