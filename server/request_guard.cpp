#include "request_guard.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ferrox::server {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool is_host_name(std::string_view s) {
    return !s.empty() && s.size() <= 253 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    });
}

bool is_ip_literal(const std::string& s) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// The name part of a Host value: "[::1]:8080" -> "::1", "a.b:80" -> "a.b".
std::string host_name_of(std::string_view host) {
    if (!host.empty() && host.front() == '[') {
        const size_t close = host.find(']');
        return lower(host.substr(1, close == std::string_view::npos ? host.npos : close - 1));
    }
    return lower(host.substr(0, host.rfind(':')));
}

std::string_view header(const HttpRequest& r, http::field f) {
    const auto it = r.find(f);
    return it == r.end() ? std::string_view()
                         : std::string_view(it->value().data(), it->value().size());
}

}  // namespace

Expected<std::string> checked_origin(std::string_view text) {
    if (text.empty() || text == "*") return std::string(text);
    const std::string o = lower(text);
    const auto bad = [&](std::string_view why) {
        return make_error("server.cors_origin '{}' is not an origin (scheme://host[:port]): {}",
                          text, why);
    };
    std::string_view rest;
    if (o.rfind("http://", 0) == 0)
        rest = std::string_view(o).substr(7);
    else if (o.rfind("https://", 0) == 0)
        rest = std::string_view(o).substr(8);
    else
        return bad("the scheme must be http or https");
    std::string_view host = rest, port;
    if (!rest.empty() && rest.front() == '[') {
        const size_t close = rest.find(']');
        if (close == std::string_view::npos) return bad("an unclosed '['");
        unsigned char buf[16];
        if (::inet_pton(AF_INET6, std::string(rest.substr(1, close - 1)).c_str(), buf) != 1)
            return bad("not an IPv6 address inside [ ]");
        host = rest.substr(0, close + 1);
        port = rest.substr(close + 1);
    } else {
        const size_t colon = rest.find(':');
        host = rest.substr(0, colon);
        port = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
        if (!is_host_name(host)) return bad("the host may hold only letters, digits, '-' and '.'");
    }
    if (!port.empty()) {
        const std::string_view digits = port.substr(1);
        if (port.front() != ':' || digits.empty() || digits.size() > 5 ||
            !std::all_of(digits.begin(), digits.end(),
                         [](char c) { return c >= '0' && c <= '9'; }) ||
            std::stoul(std::string(digits)) > 65535)
            return bad("nothing but ':port' may follow the host (no path, no spaces)");
    }
    return o;
}

Expected<std::vector<std::string>> checked_host_list(std::string_view text) {
    std::vector<std::string> names;
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string name = lower(trim(text.substr(0, comma)));
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (name.empty()) continue;
        if (!is_host_name(name))
            return make_error("server.allowed_hosts: '{}' is not a host name", name);
        names.push_back(name);
    }
    return names;
}

std::optional<Refused> guard_request(const HttpRequest& request, const GuardOptions& options) {
    if (const std::string_view host = header(request, http::field::host); !host.empty()) {
        const std::string name = host_name_of(host);
        const auto& list = options.allowed_hosts;
        // A rebinding page reaches the server under its own DNS name; an IP
        // literal or localhost cannot be re-pointed by someone else's DNS.
        if (name != "localhost" && !is_ip_literal(name) &&
            std::find(list.begin(), list.end(), name) == list.end())
            return Refused{403, fmt::format("Host '{}' is not a name of this server (an IP "
                                            "address, localhost, or server.allowed_hosts)",
                                            name)};
    }
    if (const std::string_view origin = header(request, http::field::origin); !origin.empty()) {
        if (options.cors_origin != "*" && lower(origin) != options.cors_origin)
            return Refused{403, options.cors_origin.empty()
                                    ? std::string("requests from web pages (with an Origin "
                                                  "header) are refused; server.cors_origin "
                                                  "allows one origin")
                                    : fmt::format("Origin is not server.cors_origin ({})",
                                                  options.cors_origin)};
    }
    if (request.method() == http::verb::post) {
        const std::string_view type = header(request, http::field::content_type);
        if (lower(trim(type.substr(0, type.find(';')))) != "application/json")
            return Refused{415, "a POST body must be sent as Content-Type: application/json"};
    }
    return std::nullopt;
}

}  // namespace ferrox::server
