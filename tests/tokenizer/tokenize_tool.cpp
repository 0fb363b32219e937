// ferrox_tokenize_tool GGUF: the ferrox side of tests/parity. Reads JSON lines
// on stdin, answers one JSON line each on stdout. Text travels hex-encoded so
// that any byte string (invalid UTF-8 included) survives JSON.
//   {"op":"encode","text_hex":"48690a","add_special":true,"parse_special":false} -> {"ids":[...]}
//   {"op":"pieces","ids":[1,2]}  -> {"pieces_hex":["..",".."]}
//   {"op":"decode","ids":[1,2]}  -> {"text_hex":"..."}
//   {"op":"encode_segments","segments":[{"text_hex":"..","parse_special":true},..],
//    "add_special":true} -> {"ids":[...]}
//   {"op":"info"} -> {"vocab_size":N,"bos":B,"eos":E,"eog":[...]}
// ferrox_tokenize_tool --pre-names: the pre-tokenizer table as one JSON array
// ({"name","llama_type","supported","scanner","ignore_merges","add_bos","spelling",
// "newline_runs_whole","bos_always"}), no model needed.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "ferrox/gguf/file.h"
#include "ferrox/tokenizer/tokenizer.h"
#include "tokenizer/pre_tokenizer.h"

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
    if (op == "encode_segments") {
        std::vector<std::string> texts;
        std::vector<bool> parse;
        for (const auto& segment : request.at("segments")) {
            texts.push_back(from_hex(segment.at("text_hex").get<std::string>()));
            parse.push_back(segment.value("parse_special", false));
        }
        std::vector<ferrox::TextSegment> segments;
        for (size_t i = 0; i < texts.size(); ++i) segments.push_back({texts[i], parse[i]});
        return {{"ids", tokenizer.encode(segments, request.value("add_special", false))}};
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

nlohmann::json pre_tokenizer_table() {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& entry : ferrox::tokenizer_detail::pre_tokenizer_names())
        names.push_back(
            {{"name", entry.name},
             {"llama_type", entry.llama_type},
             {"supported", entry.info.has_value()},
             {"scanner",
              entry.info ? ferrox::tokenizer_detail::scanner_name(entry.info->kind) : ""},
             {"ignore_merges", entry.info && entry.info->ignore_merges},
             {"add_bos", entry.info && entry.info->add_bos},
             {"spelling", entry.info && entry.info->spelling ==
                                            ferrox::tokenizer_detail::Spelling::sentencepiece
                              ? "sentencepiece"
                              : "byte-level"},
             {"newline_runs_whole", entry.info && entry.info->newline_runs_whole},
             {"bos_always", entry.info && entry.info->bos_always}});
    return names;
}

int main(int argc, char** argv) {
    if (argc == 2 && std::string_view(argv[1]) == "--pre-names") {
        std::cout << pre_tokenizer_table().dump() << '\n';
        return 0;
    }
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
