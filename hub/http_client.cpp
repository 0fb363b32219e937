#include "ferrox/hub/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "ferrox/escape.h"
#include "ferrox/log.h"

namespace ferrox::hub {
namespace {

constexpr int kMaxRedirects = 5;
constexpr size_t kMaxHeaderBytes = 256 << 10;  // all headers of one hop
constexpr size_t kMaxIgnoredBody = 1 << 20;    // of a redirect's or an error's body
constexpr long kConnectTimeoutS = 30;
constexpr long kStallSeconds = 60;  // below 1 byte/s this long: the transfer is dropped

struct CurlUrl {
    CURLU* h = curl_url();
    ~CurlUrl() { curl_url_cleanup(h); }
    std::string part(CURLUPart which, unsigned flags = 0) const {
        char* text = nullptr;
        if (curl_url_get(h, which, &text, flags) != CURLUE_OK) return {};
        std::string out(text);
        curl_free(text);
        return out;
    }
};

std::string lowercase(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return std::string(s);
}

// A URL for messages: without its query, which on a CDN carries a signature.
std::string shown_url(const std::string& url) { return escape_text(url.substr(0, url.find('?'))); }

// What the callbacks of one hop share.
struct HopState {
    CURL* curl = nullptr;
    const GetRequest* request = nullptr;
    Hop hop;
    size_t header_bytes = 0;
    size_t ignored_body = 0;
    uint64_t body_bytes = 0;
    bool sink_stopped = false;
    bool too_big = false;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto& s = *static_cast<HopState*>(user);
    const size_t n = size * count;
    s.header_bytes += n;
    if (s.header_bytes > kMaxHeaderBytes) {
        s.too_big = true;
        return 0;
    }
    const std::string_view line(data, n);
    if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): start over
        s.hop.headers.clear();
        return n;
    }
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos)
        s.hop.headers[lowercase(std::string(line.substr(0, colon)))] =
            trimmed(line.substr(colon + 1));
    return n;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto& s = *static_cast<HopState*>(user);
    const size_t n = size * count;
    curl_easy_getinfo(s.curl, CURLINFO_RESPONSE_CODE, &s.hop.status);
    if (s.hop.status < 200 || s.hop.status >= 300) {  // a redirect's or an error's page
        s.ignored_body += n;
        return s.ignored_body > kMaxIgnoredBody ? 0 : n;
    }
    s.body_bytes += n;
    if (s.request->on_body && !s.request->on_body(s.hop, std::span<const char>(data, n))) {
        s.sink_stopped = true;
        return 0;
    }
    return n;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
    auto& s = *static_cast<HopState*>(user);
    if (s.request->on_progress && s.hop.status >= 200 && s.hop.status < 300)
        s.request->on_progress(static_cast<uint64_t>(now), static_cast<uint64_t>(total));
    return 0;
}

void ensure_curl_global() {
    static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
    (void)done;
}

// One request; Error only when no answer came (or the sink stopped it).
Expected<Hop> perform(const HubSettings& hub, const GetRequest& request, const std::string& url,
                      bool send_token, HttpFailure* why, uint64_t* body_bytes) {
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return make_error("libcurl could not start a transfer");
    HopState state;
    state.curl = curl.get();
    state.request = &request;
    state.hop.url = url;
    curl_slist* raw_headers = nullptr;
    // Never logged: the token is only ever in this header list.
    if (send_token && !hub.token.empty())
        raw_headers =
            curl_slist_append(raw_headers, ("Authorization: Bearer " + hub.token).c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(raw_headers, curl_slist_free_all);
    const std::string range =
        request.range_from ? fmt::format("{}-", *request.range_from) : std::string();
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ferrox/" FERROX_HUB_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, kStallSeconds);
    if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &state);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &state);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &state.hop.status);
    *body_bytes = state.body_bytes;
    if (state.sink_stopped) {
        *why = HttpFailure::Aborted;
        return make_error("stopped");
    }
    if (state.too_big) {
        *why = HttpFailure::Status;
        return make_error("{} sent more than {} bytes of headers", shown_url(url), kMaxHeaderBytes);
    }
    if (rc != CURLE_OK) {
        *why = HttpFailure::Network;
        if (state.body_bytes > 0)
            return make_error("the transfer from {} broke off after {} bytes of its body: {}",
                              shown_url(url), state.body_bytes, curl_easy_strerror(rc));
        return make_error("GET {}: {}", shown_url(url), curl_easy_strerror(rc));
    }
    return std::move(state.hop);
}

}  // namespace

const std::string* Hop::header(const std::string& lowercase_name) const {
    const auto it = headers.find(lowercase_name);
    return it == headers.end() ? nullptr : &it->second;
}

const std::string* Fetched::header(const std::string& lowercase_name) const {
    for (const Hop& hop : hops)
        if (const std::string* value = hop.header(lowercase_name)) return value;
    return nullptr;
}

HubSettings HubSettings::from_environment() {
    HubSettings s;
    if (const char* e = std::getenv("HF_ENDPOINT"); e != nullptr && *e != '\0') {
        s.endpoint = e;
        while (s.endpoint.size() > 1 && s.endpoint.back() == '/') s.endpoint.pop_back();
    }
    if (const char* t = std::getenv("HF_TOKEN"); t != nullptr) s.token = trimmed(t);
    return s;
}

std::string status_text(long status) {
    const char* name = "";
    switch (status) {
        case 400:
            name = "Bad Request";
            break;
        case 401:
            name = "Unauthorized";
            break;
        case 403:
            name = "Forbidden";
            break;
        case 404:
            name = "Not Found";
            break;
        case 410:
            name = "Gone";
            break;
        case 416:
            name = "Range Not Satisfiable";
            break;
        case 429:
            name = "Too Many Requests";
            break;
        case 500:
            name = "Internal Server Error";
            break;
        case 502:
            name = "Bad Gateway";
            break;
        case 503:
            name = "Service Unavailable";
            break;
        case 504:
            name = "Gateway Timeout";
            break;
        default:
            return fmt::format("HTTP {}", status);
    }
    return fmt::format("{} {}", status, name);
}

std::string origin_of(const std::string& url) {
    ensure_curl_global();
    CurlUrl u;
    if (curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
    const std::string scheme = lowercase(u.part(CURLUPART_SCHEME));
    const std::string host = lowercase(u.part(CURLUPART_HOST));
    const std::string port = u.part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
    if (scheme.empty() || host.empty()) return {};
    return fmt::format("{}://{}:{}", scheme, host, port);
}

bool token_may_travel_to(const std::string& origin) {
    if (origin.starts_with("https://")) return true;
    if (!origin.starts_with("http://")) return false;
    ensure_curl_global();
    CurlUrl u;
    if (curl_url_set(u.h, CURLUPART_URL, origin.c_str(), 0) != CURLUE_OK) return false;
    const std::string host = lowercase(u.part(CURLUPART_HOST));
    if (host == "localhost" || host == "[::1]") return true;
    // 127.0.0.0/8 written as a dotted quad (curl has normalised other spellings).
    unsigned a = 0, b = 0, c = 0, d = 0;
    char tail = 0;
    return std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 &&
           b < 256 && c < 256 && d < 256;
}

Expected<Fetched> http_get(const HubSettings& hub, const GetRequest& request, HttpFailure* why) {
    ensure_curl_global();
    *why = HttpFailure::None;
    const std::string hub_origin = origin_of(hub.endpoint);
    if (hub_origin.empty()) {
        *why = HttpFailure::Refused;
        return make_error("HF_ENDPOINT \"{}\" is not a URL", escape_text(hub.endpoint));
    }
    if (!hub.token.empty() && !token_may_travel_to(hub_origin)) {
        *why = HttpFailure::Refused;
        return make_error(
            "refused to send HF_TOKEN to {} over plain http (anyone on the way could read it): "
            "use an https HF_ENDPOINT, or unset HF_TOKEN",
            escape_text(hub_origin));
    }
    Fetched fetched;
    std::string url = request.url;
    for (int hops = 0;; ++hops) {
        const std::string origin = origin_of(url);
        const std::string scheme = origin.substr(0, origin.find(':'));
        if (scheme != "http" && scheme != "https") {
            *why = HttpFailure::Refused;
            return make_error("refused to follow {}: only http and https are fetched",
                              shown_url(url));
        }
        uint64_t body_bytes = 0;
        auto hop = perform(hub, request, url, origin == hub_origin, why, &body_bytes);
        fetched.body_bytes += body_bytes;
        if (!hop) return hop.error();
        logger().debug("hub: GET {} -> {}", shown_url(url), hop->status);
        fetched.hops.push_back(std::move(*hop));
        const Hop& h = fetched.hops.back();
        if (h.status >= 200 && h.status < 300) return fetched;
        const std::string* location = h.header("location");
        if (h.status >= 300 && h.status < 400 && location != nullptr) {
            if (hops + 1 > kMaxRedirects) {
                *why = HttpFailure::Refused;
                return make_error("GET {}: more than {} redirects", shown_url(request.url),
                                  kMaxRedirects);
            }
            CurlUrl next;  // the Location against the URL that answered
            if (curl_url_set(next.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK ||
                curl_url_set(next.h, CURLUPART_URL, location->c_str(), 0) != CURLUE_OK) {
                *why = HttpFailure::Refused;
                return make_error("GET {}: unusable redirect to \"{}\"", shown_url(url),
                                  shown_url(*location));
            }
            std::string target = next.part(CURLUPART_URL);
            if (scheme == "https" && origin_of(target).starts_with("http:")) {
                *why = HttpFailure::Refused;
                return make_error("refused the redirect from {} to {}: https to plain http",
                                  shown_url(url), shown_url(target));
            }
            url = std::move(target);
            continue;
        }
        *why = h.status == 404                      ? HttpFailure::NotFound
               : h.status == 401 || h.status == 403 ? HttpFailure::Unauthorized
                                                    : HttpFailure::Status;
        return make_error("{} from {}", status_text(h.status), shown_url(url));
    }
}

}  // namespace ferrox::hub
