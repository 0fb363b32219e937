#include "bounded_json.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace ferrox::api {
namespace {

// Thrown from the parser's callback to stop at the first bound crossed; the
// parser itself is iterative, so nothing deeper than the bound is ever built.
struct JsonBound {
    std::string message;
};

}  // namespace

// ordered_json finds each key by a linear search, so an unbounded object
// would cost its size squared: the member count is bounded as it is read.
Expected<nlohmann::ordered_json> parse_bounded_json(const char* text, size_t len, const char* what,
                                                    const JsonBounds& bounds) {
    using nlohmann::ordered_json;
    if (len > bounds.max_bytes)
        return make_error("{}: {} bytes; at most {}", what, len, bounds.max_bytes);
    std::vector<uint32_t> members;  // per open container: the members of an object so far
    const auto bound = [&](int depth, ordered_json::parse_event_t event, ordered_json&) {
        using E = ordered_json::parse_event_t;
        if (event == E::object_start || event == E::array_start) {
            if (static_cast<unsigned>(depth) >= bounds.max_depth)
                throw JsonBound{fmt::format("nested deeper than {} levels", bounds.max_depth)};
            members.push_back(0);
        } else if (event == E::object_end || event == E::array_end) {
            if (!members.empty()) members.pop_back();
        } else if (event == E::key && !members.empty() && ++members.back() > bounds.max_members) {
            throw JsonBound{fmt::format("an object with more than {} members", bounds.max_members)};
        }
        return true;
    };
    try {
        return ordered_json::parse(text, text + len, bound);
    } catch (const JsonBound& b) {
        return make_error("{}: {}", what, b.message);
    } catch (const ordered_json::exception& e) {
        return make_error("{}: {}", what, e.what());
    }
}

}  // namespace ferrox::api
