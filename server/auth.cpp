#include "auth.h"

#include <cstdlib>
#include <fstream>

namespace ferrox::server {

Expected<std::vector<std::string>> load_api_keys(const std::string& path) {
    std::vector<std::string> keys;
    if (path.empty()) {
        if (const char* env = std::getenv("FERROX_API_KEY"); env && *env) keys.emplace_back(env);
        return keys;
    }
    std::ifstream in(path);
    if (!in) return make_error("{}: cannot read the API key file", path);
    std::string line;
    while (std::getline(in, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
            line.pop_back();
        const size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#') continue;
        keys.push_back(line.substr(start));
    }
    if (keys.empty()) return make_error("{}: the API key file holds no key", path);
    return keys;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    // Always walk the expected key's length, whatever the guess's.
    for (size_t i = 0; i < b.size(); ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        diff |= x ^ static_cast<unsigned char>(b[i]);
    }
    return diff == 0;
}

int matching_key(const std::vector<std::string>& keys, std::string_view authorization,
                 std::string_view x_api_key) {
    if (keys.empty()) return 0;
    constexpr std::string_view kBearer = "Bearer ";
    std::string_view given = x_api_key;
    if (!authorization.empty()) {
        if (authorization.substr(0, kBearer.size()) != kBearer) return -1;
        given = authorization.substr(kBearer.size());
    }
    if (given.empty()) return -1;
    int found = -1;
    // Every key is compared, whichever matches.
    for (size_t i = 0; i < keys.size(); ++i)
        if (constant_time_equal(given, keys[i])) found = static_cast<int>(i);
    return found;
}

}  // namespace ferrox::server
