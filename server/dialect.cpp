#include "dialect.h"

#include <fmt/format.h>

#include <mutex>
#include <random>

#include "error_shape.h"

namespace ferrox::server {

Dialect::Chunks Dialect::stream_error(const ApiError& e) {
    return {"data: " + error_json(ErrorShape::OpenAI, e) + "\n\n"};
}

uint64_t random_seed() {
    static std::mt19937_64 seeds{std::random_device{}()};
    static std::mutex seeds_m;
    std::lock_guard lock(seeds_m);
    return seeds();
}

uint32_t checked_max_tokens(Fields& f, const char* key, bool required, size_t prompt,
                            uint32_t limit, const char* prompt_field) {
    if (prompt >= limit)
        throw ApiError{400,
                       fmt::format("the prompt is {} tokens; this server takes at most {} "
                                   "positions per request (prompt + {})",
                                   prompt, limit, key),
                       prompt_field};
    const int64_t room = int64_t(limit) - int64_t(prompt);
    if (required && !f.has(key)) f.fail(key, "is required");
    const int64_t budget = f.integer(key, 1, limit, room);
    if (budget > room)
        throw ApiError{400,
                       fmt::format("{} prompt tokens + {} {} = {} exceed the {} positions a "
                                   "request may use",
                                   prompt, key, budget, int64_t(prompt) + budget, limit),
                       key};
    return static_cast<uint32_t>(budget);
}

std::vector<std::string> checked_stop_strings(const nlohmann::ordered_json& value,
                                              const std::string& name, const RequestLimits& l) {
    const auto fail = [&name](const std::string& why) {
        throw ApiError{400, fmt::format("'{}' {}", name, why), name};
    };
    std::vector<std::string> stops;
    if (value.is_string()) {
        stops.push_back(value.get<std::string>());
    } else if (value.is_array()) {
        if (value.size() > l.max_stop_strings)
            fail(fmt::format("has {} strings; at most {}", value.size(), l.max_stop_strings));
        for (const auto& one : value) {
            if (!one.is_string()) fail("must be a string or a list of strings");
            stops.push_back(one.get<std::string>());
        }
    } else {
        fail("must be a string or a list of strings");
    }
    for (const auto& one : stops)
        if (one.size() > l.max_stop_bytes)
            fail(fmt::format("strings must be at most {} bytes", l.max_stop_bytes));
    return stops;
}

}  // namespace ferrox::server
