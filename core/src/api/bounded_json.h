// JSON a C caller hands over (chat messages, tools, kwargs, a JSON schema),
// parsed with its size, nesting and object sizes bounded while it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "ferrox/expected.h"

namespace ferrox::api {

struct JsonBounds {
    size_t max_bytes;
    uint32_t max_depth;    // arrays and objects inside each other
    uint32_t max_members;  // members of one object
};

// `len` bytes at `text` as ordered JSON (keys in their order); an error
// names `what` and the bound passed, or the parser's line and column.
Expected<nlohmann::ordered_json> parse_bounded_json(const char* text, size_t len, const char* what,
                                                    const JsonBounds& bounds);

}  // namespace ferrox::api
