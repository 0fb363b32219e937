// The options a plugin declares in describe() (ABI 1.6), copied out of its
// memory and checked, so that a malformed declaration refuses the plugin
// instead of letting any section through.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "ferrox/plugin_loader.h"

namespace ferrox {
namespace {

// Bounds on what a declaration's strings may hold: one line of help, a word list.
constexpr size_t kMaxKeyBytes = 64;
constexpr size_t kMaxTextBytes = 1024;
// The 1.6 form: a plugin's elements are at least this long.
constexpr size_t kSpecSize16 = offsetof(ferrox_option_spec, help) + sizeof(const char*);
constexpr size_t kMaxSpecSize = 4096;

// The plugin's string, at most `limit` bytes, or nullopt when it is longer.
std::optional<std::string> bounded(const char* text, size_t limit) {
    if (!text) return std::string();
    const size_t n = strnlen(text, limit + 1);
    if (n > limit) return std::nullopt;
    return std::string(text, n);
}

bool is_key(std::string_view key) {
    return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}

Expected<OptionSpec> copy_spec(const ferrox_option_spec& raw) {
    OptionSpec spec;
    const auto key = bounded(raw.key, kMaxKeyBytes);
    if (!raw.key || !key || !is_key(*key))
        return make_error("its key must be 1..{} bytes of a-z, 0-9 and _", kMaxKeyBytes);
    spec.key = *key;
    if (spec.key == "required") return make_error("'required' is the core's key, not a plugin's");
    if (static_cast<uint32_t>(raw.kind) > static_cast<uint32_t>(FERROX_OPTION_TEXT))
        return make_error("kind {} is not one this ferrox knows", static_cast<uint32_t>(raw.kind));
    spec.kind = raw.kind;
    spec.min = raw.min;
    spec.max = raw.max;
    if ((spec.kind == FERROX_OPTION_INTEGER || spec.kind == FERROX_OPTION_BYTES) &&
        (spec.min > spec.max || (spec.kind == FERROX_OPTION_BYTES && spec.min < 0)))
        return make_error("range {}..{} is empty or, for a size, negative", spec.min, spec.max);
    if (spec.kind == FERROX_OPTION_CHOICE) {
        const auto words = bounded(raw.choices, kMaxTextBytes);
        if (!raw.choices || !words || words->empty())
            return make_error("a choice needs its words ('a|b', at most {} bytes)", kMaxTextBytes);
        for (std::string_view rest = *words;;) {
            const size_t bar = rest.find('|');
            const std::string_view word = rest.substr(0, bar);
            if (word.empty()) return make_error("an empty word in choices '{}'", *words);
            spec.choices.emplace_back(word);
            if (bar == std::string_view::npos) break;
            rest.remove_prefix(bar + 1);
        }
    }
    const auto help = bounded(raw.help, kMaxTextBytes);
    if (!help) return make_error("its help is longer than {} bytes", kMaxTextBytes);
    spec.help = *help;
    if (raw.default_value) {
        const auto text = bounded(raw.default_value, kMaxTextBytes);
        if (!text) return make_error("its default is longer than {} bytes", kMaxTextBytes);
        // A default the plugin's own rule refuses is a bug in the plugin, caught here.
        auto normal = normal_option_value(spec, "its default", *text);
        if (!normal) return normal.error();
        spec.default_value = std::move(*normal);
    }
    return spec;
}

}  // namespace

Expected<std::vector<OptionSpec>> read_declared_options(const ferrox_plugin_info& info) {
    std::vector<OptionSpec> specs;
    if (FERROX_ABI_MINOR(info.abi_version) < 6 || info.n_options == 0) return specs;
    if (info.n_options > FERROX_MAX_OPTIONS)
        return make_error("it declares {} options, more than the {} allowed", info.n_options,
                          FERROX_MAX_OPTIONS);
    if (!info.options) return make_error("it declares {} options but no array", info.n_options);
    if (info.option_spec_size < kSpecSize16 || info.option_spec_size > kMaxSpecSize)
        return make_error("option_spec_size {} is outside {}..{}", info.option_spec_size,
                          kSpecSize16, kMaxSpecSize);
    const auto* bytes = reinterpret_cast<const unsigned char*>(info.options);
    for (uint32_t i = 0; i < info.n_options; ++i) {
        // The plugin's stride; members past what this core knows are ignored.
        ferrox_option_spec raw{};
        std::memcpy(&raw, bytes + size_t(i) * info.option_spec_size,
                    std::min<size_t>(info.option_spec_size, sizeof raw));
        auto spec = copy_spec(raw);
        if (!spec) return make_error("option {}: {}", i, spec.error().message());
        if (std::any_of(specs.begin(), specs.end(),
                        [&](const OptionSpec& s) { return s.key == spec->key; }))
            return make_error("option {}: key '{}' is declared twice", i, spec->key);
        specs.push_back(std::move(*spec));
    }
    return specs;
}

}  // namespace ferrox
