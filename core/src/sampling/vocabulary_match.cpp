#include "ferrox/vocabulary_match.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ferrox/engine.h"
#include "ferrox/gguf/value.h"

namespace ferrox {
namespace {

std::string shown(const std::optional<std::string>& v) {
    return v ? fmt::format("'{}'", *v) : std::string("none");
}

}  // namespace

VocabularyView vocabulary_view(const Engine& engine) {
    VocabularyView v;
    v.size = uint32_t(engine.model().vocab());
    const gguf::File& file = engine.file();
    v.meta = [&file](std::string_view key) -> std::optional<std::string> {
        const gguf::Value* value = file.find(std::string(key));
        if (!value) return std::nullopt;
        if (const auto* s = std::get_if<std::string>(value)) return *s;
        return gguf::to_display_string(*value);
    };
    v.piece = [&file](int32_t id) -> std::optional<std::string> {
        const gguf::Value* value = file.find("tokenizer.ggml.tokens");
        const auto* texts = value ? std::get_if<gguf::Array>(value) : nullptr;
        if (!texts || texts->element_type() != gguf::ValueType::String || id < 0 ||
            uint64_t(id) >= texts->size())
            return std::nullopt;
        return std::string(texts->string_at(uint64_t(id)));
    };
    return v;
}

std::string vocabulary_difference(const VocabularyView& target, const VocabularyView& draft) {
    std::vector<std::string> found;
    for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre"}) {
        const auto a = target.meta(key), b = draft.meta(key);
        if (a != b) found.push_back(fmt::format("{} {} vs {}", key, shown(a), shown(b)));
    }
    if (target.size != draft.size)
        found.push_back(fmt::format("vocabulary size {} vs {}", target.size, draft.size));
    // Every id both have; the first that differs is named (one is enough to refuse).
    for (uint32_t id = 0; id < std::min(target.size, draft.size); ++id) {
        const auto a = target.piece(int32_t(id)), b = draft.piece(int32_t(id));
        if (a != b) {
            found.push_back(fmt::format("token {}: {} vs {}", id, shown(a), shown(b)));
            break;
        }
    }
    // The ids that start, end and separate text: a draft that ends on
    // another id would stop where the target does not.
    for (const char* name : {"bos", "eos", "unknown", "eot", "eom", "seperator", "padding"}) {
        const std::string key = fmt::format("tokenizer.ggml.{}_token_id", name);
        const auto a = target.meta(key), b = draft.meta(key);
        if (a != b) found.push_back(fmt::format("{} {} vs {}", key, shown(a), shown(b)));
    }
    std::string out;
    for (const std::string& f : found) out += (out.empty() ? "" : "; ") + f;
    return out;
}

}  // namespace ferrox
