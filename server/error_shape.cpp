#include "error_shape.h"

#include <nlohmann/json.hpp>

namespace ferrox::server {

using nlohmann::ordered_json;

ErrorShape error_shape_of(std::string_view path) {
    constexpr std::string_view kMessages = "/v1/messages";
    const bool anthropic = path.substr(0, kMessages.size()) == kMessages &&
                           (path.size() == kMessages.size() || path[kMessages.size()] == '/');
    return anthropic ? ErrorShape::Anthropic : ErrorShape::OpenAI;
}

const char* anthropic_error_type(int status) {
    switch (status) {
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 429:
            return "rate_limit_error";
        case 503:  // no room, draining, loading: Anthropic's word for "try again later"
            return "overloaded_error";
        case 504:
            return "timeout_error";
        default:
            return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

std::string error_json(ErrorShape shape, const ApiError& e) {
    ordered_json j;
    if (shape == ErrorShape::Anthropic) {
        j["type"] = "error";
        j["error"] = {{"type", anthropic_error_type(e.status)}, {"message", e.message}};
        return json_text(j);
    }
    j["error"] = {{"message", e.message},
                  {"type", e.status >= 500 ? "server_error" : "invalid_request_error"},
                  {"param", e.param.empty() ? ordered_json(nullptr) : ordered_json(e.param)},
                  {"code", e.status}};
    return json_text(j);
}

}  // namespace ferrox::server
