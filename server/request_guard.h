// What a browser can make a loopback server do, refused before routing: a
// POST whose body is not declared application/json (a page may send
// text/plain across origins without asking), a Host that names someone
// else's site (DNS rebinding: the page's own name, re-pointed at 127.0.0.1),
// and an Origin the operator did not allow (server.cors_origin).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferrox/expected.h"
#include "http_server.h"

namespace ferrox::server {

struct GuardOptions {
    std::string cors_origin;                 // "" (no origin), "*" (any), or one origin
    std::vector<std::string> allowed_hosts;  // names beyond IP literals and localhost
};

// The setting's text as an origin ("scheme://host[:port]", http or https,
// lower-cased), "*", or "" — else an error naming what is wrong.
Expected<std::string> checked_origin(std::string_view text);
// "a.example, b.example" -> names, each checked as a host name.
Expected<std::vector<std::string>> checked_host_list(std::string_view text);

struct Refused {
    int status;
    std::string why;
};
// Why `request` is refused, or nothing.
std::optional<Refused> guard_request(const HttpRequest& request, const GuardOptions& options);

}  // namespace ferrox::server
