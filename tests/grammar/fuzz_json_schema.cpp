// libFuzzer target: bytes as "SCHEMA\0TEXT". When SCHEMA is JSON, convert it
// under tight limits; when a grammar comes out, match TEXT byte by byte and
// compute the allowed tokens of a small vocabulary as it goes. A refusal must
// be an Error -- a crash, a hang or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/grammar/json_schema.h"
#include "ferrox/grammar/matcher.h"

namespace {

std::shared_ptr<const ferrox::grammar::TokenTrie> small_vocab() {
    std::vector<std::string> pieces{"",  "{",   "}", "\"", "\":",  ",",    " ", "\n", "0", "12",
                                    "-", "1.5", "[", "]",  "true", "null", "a", "ab", "é", "\\u00"};
    std::vector<bool> eog(pieces.size(), false);
    eog[0] = true;
    return std::make_shared<const ferrox::grammar::TokenTrie>(std::move(pieces), std::move(eog));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t cut = input.find('\0');
    const std::string_view source = input.substr(0, cut);
    const std::string_view text = cut == std::string_view::npos ? "" : input.substr(cut + 1);
    nlohmann::ordered_json schema;
    try {
        schema = nlohmann::ordered_json::parse(source);
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
    ferrox::grammar::JsonSchemaLimits limits;
    limits.max_depth = 16;
    limits.max_repetition = 64;
    limits.max_properties = 32;
    limits.max_refs = 32;
    limits.max_enum = 64;
    limits.max_pattern_bytes = 256;
    limits.max_grammar_bytes = 64 * 1024;
    auto grammar = ferrox::grammar::compile_json_schema(schema, limits);
    if (!grammar) return 0;
    static const auto vocab = small_vocab();
    ferrox::grammar::GrammarMatcher m(*grammar, vocab);
    std::vector<uint64_t> mask;
    for (size_t i = 0; i < text.size() && i < 256; ++i) {
        if (!m.allowed(mask)) break;
        if (!m.accept_bytes(text.substr(i, 1))) break;
    }
    (void)m.complete();
    return 0;
}
