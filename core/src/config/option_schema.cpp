// A backend section checked against the options its plugin declares (ABI 1.6):
// the core keeps no copy of any plugin's option rules.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "config/did_you_mean.h"
#include "config/scalar_parse.h"
#include "ferrox/config.h"

namespace ferrox {

using namespace config_detail;

namespace {

// "512MiB", "8EiB - 1", else the plain count: how docs and errors show a size bound.
std::string size_text(int64_t bytes) {
    if (bytes == std::numeric_limits<int64_t>::max()) return "8EiB - 1";
    constexpr std::array<std::pair<int64_t, const char*>, 4> kUnits{
        {{int64_t(1) << 40, "TiB"}, {int64_t(1) << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}};
    for (const auto& [unit, name] : kUnits)
        if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, name);
    return std::to_string(bytes);
}

std::string range_text(const OptionSpec& spec) {
    if (spec.kind == FERROX_OPTION_BYTES)
        return fmt::format("{} and {}", size_text(spec.min), size_text(spec.max));
    return fmt::format("{} and {}", spec.min, spec.max);
}

std::string quoted(std::span<const std::string> words) {
    std::string out;
    for (const std::string& w : words) out += fmt::format("{}'{}'", out.empty() ? "" : ", ", w);
    return out;
}

// "<origin>: <message>", or the message alone when nothing says where it came from.
Error at(std::string_view origin, const std::string& message) {
    if (origin.empty()) return Error(message);
    return make_error("{}: {}", origin, message);
}

}  // namespace

void BackendConfig::set_option(std::string_view key, std::string value, std::string_view flag) {
    origins.resize(options.size());
    const OptionOrigin from_flag{std::string(flag), std::string(flag)};
    for (size_t i = 0; i < options.size(); ++i)
        if (options[i].first == key) {
            options[i].second = std::move(value);
            origins[i] = from_flag;
            return;
        }
    options.emplace_back(std::string(key), std::move(value));
    origins.push_back(from_flag);
}

Expected<std::string> normal_option_value(const OptionSpec& spec, std::string_view key_path,
                                          std::string_view text) {
    switch (spec.kind) {
        case FERROX_OPTION_INTEGER: {
            const auto parsed = parse_integer(text);
            if (const auto* problem = std::get_if<NumberProblem>(&parsed)) {
                if (*problem == NumberProblem::NotANumber)
                    return make_error("{} must be an integer, got '{}'", key_path, text);
                return make_error("{} must be between {}, got {}", key_path, range_text(spec),
                                  text);
            }
            const int64_t value = std::get<int64_t>(parsed);
            if (value < spec.min || value > spec.max)
                return make_error("{} must be between {}, got {}", key_path, range_text(spec),
                                  value);
            return std::to_string(value);
        }
        case FERROX_OPTION_BYTES: {
            const ByteSizeResult size = parse_byte_size(text);
            if (!size.ok && !size.negative && !size.overflow) {
                std::string message = fmt::format(
                    "{} must be a number of bytes or a size such as \"512MiB\", \"8GiB\" (units "
                    "B, KiB, MiB, GiB, TiB), got '{}'",
                    key_path, text);
                if (!size.suggestion.empty())
                    message += fmt::format("; did you mean '{}'?", size.suggestion);
                return Error(message);
            }
            if (!size.ok || size.bytes < uint64_t(spec.min) || size.bytes > uint64_t(spec.max))
                return make_error("{} must be between {}, got {}", key_path, range_text(spec),
                                  size.ok ? std::to_string(size.bytes) : std::string(text));
            return std::to_string(size.bytes);
        }
        case FERROX_OPTION_CHOICE: {
            if (std::find(spec.choices.begin(), spec.choices.end(), text) != spec.choices.end())
                return std::string(text);
            std::string message =
                fmt::format("{} must be one of {}, got '{}'", key_path, quoted(spec.choices), text);
            if (const auto suggestion = closest_match(text, spec.choices))
                message += fmt::format("; did you mean '{}'?", *suggestion);
            return Error(message);
        }
        case FERROX_OPTION_BOOL: {
            const auto value = parse_bool(text);
            if (const bool* b = std::get_if<bool>(&value))
                return std::string(*b ? "true" : "false");
            return make_error("{} must be true or false, got '{}'", key_path, text);
        }
        case FERROX_OPTION_TEXT:
            return std::string(text);
    }
    return make_error("{}: option kind {} is unknown", key_path, static_cast<int>(spec.kind));
}

Expected<std::vector<std::pair<std::string, std::string>>> apply_option_schema(
    const BackendConfig& backend, std::span<const OptionSpec> schema) {
    std::vector<std::pair<std::string, std::string>> out;
    std::vector<std::string> valid_keys{"required"};
    for (const OptionSpec& spec : schema) valid_keys.push_back(spec.key);
    for (size_t i = 0; i < backend.options.size(); ++i) {
        const auto& [key, text] = backend.options[i];
        const OptionOrigin origin =
            i < backend.origins.size() ? backend.origins[i] : OptionOrigin{};
        const auto spec = std::find_if(schema.begin(), schema.end(),
                                       [&](const OptionSpec& s) { return s.key == key; });
        if (spec == schema.end()) {
            std::string message =
                fmt::format("unknown key '{}' in section '{}'", key, backend.name);
            if (const auto suggestion = config_detail::closest_match(key, valid_keys))
                message += fmt::format("; did you mean '{}'?", *suggestion);
            else
                message += fmt::format("; valid keys are {} (as the {} plugin declares them)",
                                       quoted(valid_keys), backend.name);
            return at(origin.key, message);
        }
        auto normal = normal_option_value(*spec, fmt::format("{}.{}", backend.name, key), text);
        if (!normal) return at(origin.value, normal.error().message());
        out.emplace_back(key, std::move(*normal));
    }
    for (const OptionSpec& spec : schema) {
        const bool set = std::any_of(out.begin(), out.end(),
                                     [&](const auto& option) { return option.first == spec.key; });
        if (!set && spec.default_value) out.emplace_back(spec.key, *spec.default_value);
    }
    return out;
}

std::string option_schema_markdown(std::span<const OptionSpec> schema) {
    std::string out = "| Key | Type | Default | Meaning |\n|-----|------|---------|---------|\n";
    for (const OptionSpec& spec : schema) {
        std::string type;
        switch (spec.kind) {
            case FERROX_OPTION_INTEGER:
                type = fmt::format("integer {}..{}", spec.min, spec.max);
                break;
            case FERROX_OPTION_BYTES:
                type = fmt::format("bytes or a size, {}..{}", size_text(spec.min),
                                   size_text(spec.max));
                break;
            case FERROX_OPTION_CHOICE:
                for (const std::string& c : spec.choices)
                    type += fmt::format("{}`{}`", type.empty() ? "" : ", ", c);
                break;
            case FERROX_OPTION_BOOL:
                type = "`true`, `false`";
                break;
            case FERROX_OPTION_TEXT:
                type = "string";
                break;
        }
        const std::string shown =
            spec.default_value ? fmt::format("`{}`", *spec.default_value) : "(none)";
        out += fmt::format("| `{}` | {} | {} | {} |\n", spec.key, type, shown, spec.help);
    }
    return out;
}

}  // namespace ferrox
