// How the API layer reads a request body: every field checked by kind and
// range, a refusal naming the field (ApiError), and whatever was not read
// refused by name (Fields::refuse_the_rest). Shared by the endpoints and
// every generation dialect (server/dialect.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace ferrox::server {

// A refused request: the HTTP status, the message, and the field at fault.
struct ApiError {
    int status;
    std::string message;
    std::string param;
};

// Throws the 400 ApiError for the field or JSON pointer `name`: "'name' why".
[[noreturn]] void refuse_field(const std::string& name, const std::string& why);

// JSON text as the server sends it (invalid UTF-8 replaced, never thrown on).
std::string json_text(const nlohmann::ordered_json& j);

// Reads one JSON object's fields, each checked, and refuses what is left.
class Fields {
  public:
    // `where`: the object's name in messages ("messages[2]"); "" for the body.
    Fields(const nlohmann::ordered_json& object, std::string where);

    bool has(const char* key);  // present and not null
    const nlohmann::ordered_json& raw(const char* key);
    double number(const char* key, double lo, double hi, double fallback);
    int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback);
    bool boolean(const char* key, bool fallback);
    std::string string(const char* key, std::string fallback);
    // Every field not read is refused: unimplemented ones by name.
    void refuse_the_rest();
    [[noreturn]] void fail(const std::string& key, const std::string& why) const;

  private:
    const nlohmann::ordered_json& o_;
    std::string where_;
    std::set<std::string, std::less<>> seen_;
};

// messages[] checked and reduced to {role, content: string} for the template.
nlohmann::ordered_json checked_messages(const nlohmann::ordered_json& messages,
                                        uint32_t max_messages);

}  // namespace ferrox::server
