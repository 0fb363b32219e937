// API keys: `Authorization: Bearer <key>` (or Anthropic's `x-api-key: <key>`)
// checked against every configured key in time that does not depend on where
// a guess first differs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::server {

// Keys from `path` (one a line; blank lines and lines starting with '#' skipped),
// else from $FERROX_API_KEY; none: the server is open. A file that cannot be
// read, or holds no key, is an error.
Expected<std::vector<std::string>> load_api_keys(const std::string& path);

// Equal contents, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Which of `keys` the request carries: its index, 0 when keys is empty (the
// one tenant of an open server), -1 for none. The key is `authorization`'s
// (the header's value, "Bearer <key>") when that header is there, else
// `x_api_key`'s (Anthropic's header, the key as is).
int matching_key(const std::vector<std::string>& keys, std::string_view authorization,
                 std::string_view x_api_key = {});

// True when `authorization` carries one of `keys`, or keys is empty.
inline bool authorized(const std::vector<std::string>& keys, std::string_view authorization) {
    return matching_key(keys, authorization) >= 0;
}

}  // namespace ferrox::server
