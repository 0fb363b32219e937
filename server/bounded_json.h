// A request body to JSON in one linear pass, with its shape bounded while it
// is read: nesting depth, values in all, members of one object, and no
// duplicate keys. nlohmann's ordered_json checks each new key against every
// earlier one (a 4 MiB object took O(n^2)); here keys are checked by hash and
// appended, so a body costs time and memory in proportion to its size.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ferrox/expected.h"

namespace ferrox::server {

struct JsonLimits {
    size_t max_depth = 0;
    size_t max_values = 0;          // every value, containers included
    size_t max_object_members = 0;  // in any one object
};

// A request body's bounds (RequestLimits::json), and those of JSON text a
// body carries inside a string (a past tool call's arguments).
inline constexpr JsonLimits kRequestJsonLimits{64, 1u << 18, 4096};

// The value, or an error naming the byte offset and the limit crossed.
Expected<nlohmann::ordered_json> parse_bounded_json(std::string_view text,
                                                    const JsonLimits& limits);

}  // namespace ferrox::server
