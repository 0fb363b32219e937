// HTTP GETs against the hub through libcurl, redirects followed here rather
// than by curl so that HF_TOKEN goes to the hub's own origin (scheme, host,
// port) and to no other: the hub answers a file with a 302 to a CDN host.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::hub {

struct HubSettings {
    std::string endpoint = "https://huggingface.co";  // no trailing '/'
    std::string token;                                // empty: no Authorization header
    // HF_ENDPOINT and HF_TOKEN, as huggingface_hub reads them.
    static HubSettings from_environment();
};

// Why a request failed, for the CLI's exit status.
enum class HttpFailure {
    None,
    NotFound,      // 404: the reference names nothing there
    Unauthorized,  // 401 / 403: the token is missing, wrong or not granted
    Status,        // any other answer that is not a success
    Network,       // no connection, or it broke off (the body may be partly written)
    Refused,       // a redirect we will not follow (another scheme, https to http, too many)
    Aborted,       // the body sink said stop; its own message says why
};

// One request-response of a GET, redirects each being one.
struct Hop {
    std::string url;
    long status = 0;
    std::map<std::string, std::string> headers;  // names lowercased; the last of repeated ones
    const std::string* header(const std::string& lowercase_name) const;
};

struct Fetched {
    std::vector<Hop> hops;  // the hub's first, the one that answered with the body last
    uint64_t body_bytes = 0;
    // A header from any hop, the earliest first (X-Linked-Etag is on the hub's 302).
    const std::string* header(const std::string& lowercase_name) const;
    const Hop& last() const { return hops.back(); }
};

struct GetRequest {
    std::string url;
    std::optional<uint64_t> range_from;  // sends Range: bytes=N- to every hop
    // Gets each piece of a success's body with the answering hop (its status
    // and headers are complete); returning false stops the transfer.
    std::function<bool(const Hop&, std::span<const char>)> on_body;
    // Bytes received of this answer's body and its Content-Length (0: unknown).
    std::function<void(uint64_t received, uint64_t length)> on_progress;
};

// The GET, with up to 5 redirects. The token is sent only to the origin of
// `hub.endpoint`; a redirect to another scheme than http(s), or from https to
// http, is refused. `why` says which kind of failure an Error is.
Expected<Fetched> http_get(const HubSettings& hub, const GetRequest& request, HttpFailure* why);

// "404 Not Found": the status with its name, for messages.
std::string status_text(long status);

// scheme://host:port of a URL (default port filled in); empty when unparsable.
std::string origin_of(const std::string& url);

// Whether a token may be sent to this origin (origin_of's form): over https,
// or over http only to this host (localhost, 127.0.0.0/8, ::1), where no
// network carries it. http_get refuses a request that would send HF_TOKEN
// in clear text anywhere else.
bool token_may_travel_to(const std::string& origin);

}  // namespace ferrox::hub
