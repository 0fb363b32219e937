// The driver the grammar parity test (test_grammar_parity.py) runs: JSON
// lines in, one JSON line out each. Text travels hex-encoded so that any
// byte string survives JSON.
//   {"op":"check","grammar":"...","texts_hex":[..]}
//       -> {"results":[{"prefix":N,"complete":B},..]}  N: bytes accepted before
//          the first refused one (the whole length when none was refused)
//       -> {"parse_error":"..."} when the grammar does not parse
//   {"op":"masks","grammar":"...","tokens":[..]}   (needs a GGUF on the command line)
//       -> {"masks_hex":[..],"ms":[..]}: the allowed tokens before each token and
//          after the last (bit id%8 of byte id/8), and what each mask took
//   {"op":"schema","schema_text":"..."}  (the schema as JSON text: its key order kept)
//       -> {"gbnf":"..."} or {"error":"..."}: json_schema_to_gbnf's answer
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/gguf/file.h"
#include "ferrox/grammar/gbnf.h"
#include "ferrox/grammar/json_schema.h"
#include "ferrox/grammar/matcher.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace {

nlohmann::json schema_gbnf(const std::string& text) {
    auto gbnf = ferrox::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(text));
    if (!gbnf) return {{"error", gbnf.error().message()}};
    return {{"gbnf", *gbnf}};
}

std::string from_hex(std::string_view hex) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
    return out;
}

std::string mask_hex(const std::vector<uint64_t>& mask, size_t n_vocab) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (size_t byte = 0; byte < (n_vocab + 7) / 8; ++byte) {
        const auto b = static_cast<unsigned>((mask[byte / 8] >> (8 * (byte % 8))) & 0xFF);
        out.push_back(digits[b >> 4]);
        out.push_back(digits[b & 15]);
    }
    return out;
}

nlohmann::json check(const std::string& source, const nlohmann::json& texts) {
    auto grammar = ferrox::grammar::parse_gbnf(source);
    if (!grammar) return {{"parse_error", grammar.error().message()}};
    // No vocabulary: the matcher advances over bytes alone.
    auto none = std::make_shared<const ferrox::grammar::TokenTrie>(std::vector<std::string>{},
                                                                   std::vector<bool>{});
    nlohmann::json results = nlohmann::json::array();
    for (const auto& hex : texts) {
        const std::string text = from_hex(hex.get<std::string>());
        ferrox::grammar::GrammarMatcher m(*grammar, none);
        size_t prefix = 0;
        while (prefix < text.size() && m.accept_bytes(text.substr(prefix, 1))) ++prefix;
        results.push_back(
            {{"prefix", prefix}, {"complete", prefix == text.size() && m.complete()}});
    }
    return {{"results", results}};
}

nlohmann::json masks(const std::string& source, const nlohmann::json& tokens,
                     const std::shared_ptr<const ferrox::grammar::TokenTrie>& trie) {
    if (!trie) return {{"error", "masks needs a GGUF on the command line"}};
    auto grammar = ferrox::grammar::parse_gbnf(source);
    if (!grammar) return {{"parse_error", grammar.error().message()}};
    ferrox::grammar::GrammarMatcher m(*grammar, trie);
    nlohmann::json out = nlohmann::json::array(), ms = nlohmann::json::array();
    std::vector<uint64_t> mask;
    for (size_t i = 0; i <= tokens.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (auto ok = m.allowed(mask); !ok) return {{"error", ok.error().message()}};
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
        out.push_back(mask_hex(mask, trie->vocab_size()));
        if (i == tokens.size()) break;
        if (auto ok = m.accept(tokens[i].get<int32_t>()); !ok)
            return {{"error", ok.error().message()}};
    }
    return {{"masks_hex", out}, {"ms", ms}};
}

}  // namespace

int main(int argc, char** argv) {
    std::shared_ptr<const ferrox::grammar::TokenTrie> trie;
    if (argc > 1) {
        auto file = ferrox::gguf::File::open(argv[1]);
        if (!file) {
            std::fprintf(stderr, "%s\n", file.error().message().c_str());
            return 1;
        }
        auto tokenizer = ferrox::Tokenizer::from_gguf(*file);
        if (!tokenizer) {
            std::fprintf(stderr, "%s\n", tokenizer.error().message().c_str());
            return 1;
        }
        trie = ferrox::grammar::TokenTrie::from_tokenizer(**tokenizer);
    }
    std::string line;
    while (std::getline(std::cin, line)) {
        const auto request = nlohmann::json::parse(line);
        const std::string op = request.at("op");
        nlohmann::json reply;
        if (op == "check")
            reply = check(request.at("grammar"), request.at("texts_hex"));
        else if (op == "schema")
            reply = schema_gbnf(request.at("schema_text"));
        else if (op == "masks")
            reply = masks(request.at("grammar"), request.at("tokens"), trie);
        else
            reply = {{"error", "unknown op " + op}};
        std::cout << reply.dump() << std::endl;
    }
    return 0;
}
