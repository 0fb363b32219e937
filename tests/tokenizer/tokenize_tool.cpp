// ferrox_tokenize_tool GGUF: the ferrox side of tests/parity. Reads JSON lines
// on stdin, answers one JSON line each on stdout. Text travels hex-encoded so
// that any byte string (invalid UTF-8 included) survives JSON.
//   {"op":"encode","text_hex":"48690a","add_special":true,"parse_special":false} -> {"ids":[...]}
//   {"op":"pieces","ids":[1,2]}  -> {"pieces_hex":["..",".."]}
//   {"op":"decode","ids":[1,2]}  -> {"text_hex":"..."}
//   {"op":"info"} -> {"vocab_size":N,"bos":B,"eos":E,"eog":[...]}
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/gguf/file.h"
#include "ferrox/tokenizer/tokenizer.h"

namespace {

std::string to_hex(std::string_view bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out.push_back(kDigits[b >> 4]);
        out.push_back(kDigits[b & 15]);
    }
    return out;
}

std::string from_hex(std::string_view hex) {
    std::string out;
    out.reserve(hex.size() / 2);
    const auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
    return out;
}

nlohmann::json answer(const ferrox::Tokenizer& tokenizer, const nlohmann::json& request) {
    const std::string op = request.value("op", "encode");
    if (op == "encode") {
        const std::string text = from_hex(request.at("text_hex").get<std::string>());
        return {{"ids", tokenizer.encode(text, request.value("add_special", false),
                                         request.value("parse_special", false))}};
    }
    if (op == "pieces") {
        nlohmann::json pieces = nlohmann::json::array();
        for (const int32_t id : request.at("ids").get<std::vector<int32_t>>())
            pieces.push_back(to_hex(tokenizer.token_to_piece(id)));
        return {{"pieces_hex", pieces}};
    }
    if (op == "decode") {
        const auto ids = request.at("ids").get<std::vector<int32_t>>();
        return {{"text_hex", to_hex(tokenizer.decode(ids))}};
    }
    if (op == "info") {
        nlohmann::json eog = nlohmann::json::array();
        for (size_t id = 0; id < tokenizer.vocab_size(); ++id)
            if (tokenizer.is_end_of_generation(static_cast<int32_t>(id))) eog.push_back(id);
        return {{"vocab_size", tokenizer.vocab_size()},
                {"bos", tokenizer.bos()},
                {"eos", tokenizer.eos()},
                {"eog", eog}};
    }
    return {{"error", "unknown op '" + op + "'"}};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf < requests.jsonl\n", argv[0]);
        return 2;
    }
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
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        nlohmann::json reply;
        try {
            reply = answer(**tokenizer, nlohmann::json::parse(line));
        } catch (const nlohmann::json::exception& e) {
            reply = {{"error", e.what()}};
        }
        std::cout << reply.dump() << '\n' << std::flush;
    }
    return 0;
}
