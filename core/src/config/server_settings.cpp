#include "ferrox/server_settings.h"

#include <fmt/format.h>

#include <array>

#include "config/scalar_parse.h"
#include "ferrox/model/resident_ops.h"

namespace ferrox {
namespace {

using K = SettingKind;
using S = ServerConfig;

constexpr int64_t kKiB = 1 << 10, kMiB = 1 << 20, kGiB = int64_t(1) << 30, kTiB = int64_t(1) << 40;

ServerSetting text(std::string_view key, std::string_view flags, std::string S::*member,
                   std::string_view help, std::string_view unset = {}) {
    return {key, flags, K::Text, member, help, 0, 0, {}, unset, false};
}
ServerSetting count(std::string_view key, std::string_view flags, uint32_t S::*member,
                    std::string_view help, int64_t min, int64_t max, std::string_view unset = {}) {
    return {key, flags, K::Count, member, help, min, max, {}, unset, false};
}
ServerSetting signed_count(std::string_view key, std::string_view flags, int32_t S::*member,
                           std::string_view help, int64_t min, int64_t max) {
    return {key, flags, K::Count, member, help, min, max, {}, {}, false};
}
// A setting a `server.models` entry may also set for its own model.
ServerSetting per_model(ServerSetting s) {
    s.per_model = true;
    return s;
}
ServerSetting bytes(std::string_view key, std::string_view flags, uint64_t S::*member,
                    std::string_view help, int64_t min, int64_t max) {
    return {key, flags, K::Bytes, member, help, min, max, {}, {}, false};
}

// The order is the order of --help and of docs/config.md.
const std::array kSettings{
    text("model", "-m,--model", &S::model,
         "The GGUF file to serve, or a stored model reference (hf://OWNER/REPO/FILE.gguf, "
         "OWNER/REPO:QUANT; --pull fetches it)."),
    text("host", "--host", &S::host,
         "Address to bind; a non-loopback one needs API keys or insecure_open."),
    count("port", "--port", &S::port, "TCP port; 0 picks a free one (the bound one is logged).", 0,
          65535),
    per_model(count("parallel", "--parallel", &S::parallel,
                    "Sequences decoded together in the shared context.", 1, 64)),
    per_model(count("context", "-c,--ctx-size", &S::context, "KV cells shared by all sequences.", 0,
                    1 << 20, "0: parallel x min(4096, training context)")),
    ServerSetting{"kv_type",
                  "--kv-type",
                  K::Choice,
                  &S::kv_type,
                  "KV-cache element kind of K and V (q8_0 and q4_0: ggml blocks of 32, 34 and 18 "
                  "bytes); kv_type_k and kv_type_v set one of them.",
                  0,
                  0,
                  model::kKvCacheTypeNames,
                  {},
                  true},
    ServerSetting{"kv_type_k", "--cache-type-k", K::Choice, &S::kv_type_k,
                  "K's cache kind alone (-ctk, as llama-server); it may differ from V's, as "
                  "q8_0 keys over f16 values.",
                  0, 0, model::kKvCacheTypeNames, "kv_type's", true},
    ServerSetting{"kv_type_v", "--cache-type-v", K::Choice, &S::kv_type_v,
                  "V's cache kind alone (-ctv, as llama-server).", 0, 0, model::kKvCacheTypeNames,
                  "kv_type's", true},
    text("api_key_file", "--api-key-file", &S::api_key_file,
         "File of API keys, one a line (# comments); an empty or unreadable file refuses to "
         "start.",
         "$FERROX_API_KEY, else no keys"),
    text("alias", "--alias", &S::alias, "Model id reported by /v1/models.", "the file name"),
    per_model(count("max_queue", "--max-queue", &S::max_queue,
                    "Requests that may wait beyond the free sequences (0: none wait); more get "
                    "503.",
                    0, 65536)),
    count("request_timeout", "--request-timeout", &S::request_timeout,
          "Seconds from arrival to the last token.", 1, 86400),
    count("drain_timeout", "--drain-timeout", &S::drain_timeout,
          "Seconds in-flight requests get after SIGTERM.", 0, 86400),
    count("read_timeout", "--read-timeout", &S::read_timeout,
          "Seconds a client has to send a whole request, from its first byte.", 1, 3600),
    count("idle_timeout", "--idle-timeout", &S::idle_timeout,
          "Seconds a keep-alive connection may wait for its next request.", 1, 3600),
    text("cors_origin", "--cors-origin", &S::cors_origin,
         "The one origin (scheme://host[:port]) browsers may call from; a request with another "
         "Origin gets 403.",
         "none: every Origin is refused"),
    text("allowed_hosts", "--allowed-hosts", &S::allowed_hosts,
         "More names the Host header may carry, comma-separated (DNS-rebinding guard).",
         "IP addresses, localhost and the bound name only"),
    bytes("max_body_bytes", "--max-body-bytes", &S::max_body_bytes, "Largest request body.", kKiB,
          kGiB),
    bytes("request_memory", "--request-memory", &S::request_memory,
          "Memory the requests being parsed may hold together, each charged a fixed multiple of "
          "its body (docs/security.md); past it 503.",
          16 * kMiB, kTiB),
    count("max_connections", "--max-connections", &S::max_connections,
          "Open connections; when full, the longest-idle keep-alive one is closed.", 2, 65536),
    count("max_client_connections", "--max-client-connections", &S::max_client_connections,
          "Open connections one client address may hold.", 1, 65536),
    ServerSetting{"insecure_open",
                  "--insecure-open",
                  K::Switch,
                  &S::insecure_open,
                  "Allow a non-loopback address without API keys.",
                  0,
                  0,
                  {},
                  {},
                  false},
    signed_count("reasoning_budget", "--reasoning-budget", &S::reasoning_budget,
                 "Thinking budget in tokens of a chat request that sets no thinking_token_budget: "
                 "-1 unlimited, 0 no reasoning (docs/server.md).",
                 -1, 1 << 20),
    per_model(count("spec_draft_n_max", "--spec-draft-n-max", &S::spec_draft_n_max,
                    "Draft tokens a request verifies per step (n-gram prompt lookup, or "
                    "model_draft's), unless it "
                    "sets speculative.n_max (docs/speculation.md); only in decode rows the batch "
                    "leaves free.",
                    0, 15, "0: no speculation")),
    per_model(text("model_draft", "--model-draft", &S::model_draft,
                   "A smaller model of the same vocabulary whose greedy tokens are the drafts, "
                   "instead of n-gram prompt lookup; refused at start when its vocabulary differs "
                   "or it is recurrent; spec_draft_n_max 0 then means 8 (docs/speculation.md). "
                   "With many models, a server.models entry's only.",
                   "none: n-gram prompt lookup")),
    ServerSetting{"checkpoint_memory",
                  "--checkpoint-memory",
                  K::Bytes,
                  &S::checkpoint_memory,
                  "Memory a hybrid recurrent model's (qwen35) state checkpoints may take: one "
                  "at each 128-token prefill chunk's end and each prompt's end, least recently "
                  "used evicted, so that a "
                  "prompt extending a cached conversation resumes from the last one inside it "
                  "(docs/models.md, \"Sequence state and checkpoints\"); 0: none, every prompt "
                  "of a hybrid model is computed whole.",
                  0,
                  kTiB,
                  {},
                  {},
                  true},
    ServerSetting{"embedding_truncation",
                  "--embedding-truncation",
                  K::Switch,
                  &S::embedding_truncation,
                  "Let /v1/embeddings cut vectors to a request's `dimensions` (only for a model "
                  "trained for it, Matryoshka: Qwen3-Embedding).",
                  0,
                  0,
                  {},
                  {},
                  true},
    text("otlp_endpoint", "--otlp-endpoint", &S::otlp_endpoint,
         "OpenTelemetry traces: the OTLP/HTTP receiver's base URL (spans go to <URL>/v1/traces "
         "as JSON; docs/operations.md).",
         "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT, else off"),
    text("models_dir", "--models-dir", &S::models_dir,
         "Serve every .gguf file in this folder, each under its file name without .gguf, loaded "
         "on its first request (docs/server.md, \"Many models\"), beside the server.models "
         "entries of the configuration file; the folder and its files must pass the plugins' "
         "trust rule.",
         "none: serve server.model"),
    ServerSetting{"models_memory",
                  "--models-memory",
                  K::Bytes,
                  &S::models_memory,
                  "Memory the models of models_dir and server.models may take together (each "
                  "counted by its "
                  "capacity plan); a model that does not fit unloads the least recently used idle "
                  "one, else its request gets 503.",
                  0,
                  int64_t(1) << 50,
                  {},
                  "MemAvailable at the start",
                  false},
    per_model(signed_count("keep_alive", "--keep-alive", &S::keep_alive,
                           "Seconds a model of models_dir or server.models stays loaded after its "
                           "last request: 0 unloads it at once, -1 keeps it; a request's "
                           "keep_alive replaces it for that request.",
                           -1, int64_t(1) << 30)),
};

Error out_of_range(const ServerSetting& s, std::string_view got) {
    if (s.kind == K::Bytes)
        return make_error("server.{} must be between {} and {}, got {}", s.key,
                          size_text(uint64_t(s.min)), size_text(uint64_t(s.max)), got);
    return make_error("server.{} must be between {} and {}, got {}", s.key, s.min, s.max, got);
}

}  // namespace

std::span<const ServerSetting> server_settings() { return kSettings; }

const ServerSetting* find_server_setting(std::string_view key) {
    for (const ServerSetting& s : kSettings)
        if (s.key == key) return &s;
    return nullptr;
}

Expected<void> set_server_setting(ServerConfig& config, const ServerSetting& s,
                                  std::string_view text) {
    using namespace config_detail;
    switch (s.kind) {
        case K::Text:
            if (text.empty()) return make_error("server.{} must be a non-empty string", s.key);
            config.*std::get<std::string S::*>(s.member) = std::string(text);
            return {};
        case K::Choice: {
            for (std::string_view c : s.choices)
                if (c == text) {
                    config.*std::get<std::string S::*>(s.member) = std::string(text);
                    return {};
                }
            std::string names;
            for (std::string_view c : s.choices)
                names += fmt::format("{}'{}'", names.empty() ? "" : ", ", c);
            return make_error("server.{} must be one of {}, got '{}'", s.key, names, text);
        }
        case K::Switch: {
            const auto b = parse_bool(text);
            if (!std::holds_alternative<bool>(b))
                return make_error("server.{} must be true or false, got '{}'", s.key, text);
            config.*std::get<bool S::*>(s.member) = std::get<bool>(b);
            return {};
        }
        case K::Count: {
            const auto v = parse_integer(text);
            if (std::holds_alternative<NumberProblem>(v)) {
                if (std::get<NumberProblem>(v) == NumberProblem::TooLarge)
                    return out_of_range(s, text);
                return make_error("server.{} must be an integer, got '{}'", s.key, text);
            }
            const int64_t n = std::get<int64_t>(v);
            if (n < s.min || n > s.max) return out_of_range(s, std::to_string(n));
            if (const auto* signed_member = std::get_if<int32_t S::*>(&s.member))
                config.*(*signed_member) = static_cast<int32_t>(n);
            else
                config.*std::get<uint32_t S::*>(s.member) = static_cast<uint32_t>(n);
            return {};
        }
        case K::Bytes: {
            const ByteSizeResult size = parse_byte_size(text);
            if (!size.ok && !size.negative && !size.overflow) {
                std::string m = fmt::format(
                    "server.{} must be a number of bytes or a size such as \"512MiB\" (units B, "
                    "KiB, MiB, GiB, TiB), got '{}'",
                    s.key, text);
                if (!size.suggestion.empty())
                    m += fmt::format("; did you mean '{}'?", size.suggestion);
                return make_error("{}", m);
            }
            if (!size.ok || size.bytes < uint64_t(s.min) || size.bytes > uint64_t(s.max))
                return out_of_range(s, size.ok ? std::to_string(size.bytes) : std::string(text));
            config.*std::get<uint64_t S::*>(s.member) = size.bytes;
            return {};
        }
        case K::List:
            break;
    }
    return make_error("server.{}: unknown kind", s.key);
}

void copy_server_setting(ServerConfig& to, const ServerConfig& from, const ServerSetting& s) {
    std::visit([&](auto member) { to.*member = from.*member; }, s.member);
}

std::string server_setting_default(const ServerSetting& s) {
    static const ServerConfig defaults;
    const std::string value = std::visit(
        [&](auto member) -> std::string {
            const auto& v = defaults.*member;
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                return v;
            else if constexpr (std::is_same_v<T, bool>)
                return v ? "true" : "false";
            else if (s.kind == K::Bytes)
                return size_text(v);
            else
                return std::to_string(v);
        },
        s.member);
    if (!s.unset.empty() && (value.empty() || value == "0")) return std::string(s.unset);
    return value.empty() ? "(none)" : value;
}

std::string server_setting_type(const ServerSetting& s) {
    return setting_type_text(s.kind, s.min, s.max, s.choices);
}

std::string server_settings_markdown() {
    std::string out =
        "| Key | Flag | Type | Default | Meaning |\n|-----|------|------|---------|---------|\n";
    for (const ServerSetting& s : kSettings) {
        std::string flags;
        for (std::string_view rest = s.flags; !rest.empty();) {
            const size_t comma = rest.find(',');
            flags += fmt::format("{}`{}`", flags.empty() ? "" : ", ", rest.substr(0, comma));
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
        out += fmt::format("| `{}` | {} | {} | {} | {} |\n", s.key, flags, server_setting_type(s),
                           server_setting_default(s), s.help);
    }
    return out;
}

namespace {

const std::array kModelEntryKeys{
    ModelEntryKey{"path", "string",
                  "The GGUF file, or a model-store reference (`hf://OWNER/REPO/FILE.gguf`, "
                  "`OWNER/REPO:QUANT`: the stored file, downloaded first only with `--pull`). A "
                  "relative path names a file of models_dir (which must then be set); the file "
                  "and its folder pass the same trust rule as models_dir's.",
                  "(required)"},
    ModelEntryKey{"alias", "string, or a list of strings",
                  "The ids the model answers to in a request's `model`, each listed by "
                  "/v1/models; the first labels its /metrics series. Up to 256 bytes each, no "
                  "control characters; an id may name one model only (models_dir's included).",
                  "the file name without .gguf"},
    ModelEntryKey{"backends", "list of backend names",
                  "The backends this model opens, in priority order: some or all of "
                  "backends.order's.",
                  "backends.order"},
};

}  // namespace

std::span<const ModelEntryKey> model_entry_keys() { return kModelEntryKeys; }

std::vector<std::string> model_entry_key_names() {
    std::vector<std::string> keys;
    for (const ModelEntryKey& k : kModelEntryKeys) keys.emplace_back(k.key);
    for (const ServerSetting& s : kSettings)
        if (s.per_model) keys.emplace_back(s.key);
    return keys;
}

std::string model_entries_markdown() {
    std::string out = "| Key | Type | Default | Meaning |\n|-----|------|---------|---------|\n";
    for (const ModelEntryKey& k : kModelEntryKeys)
        out += fmt::format("| `{}` | {} | {} | {} |\n", k.key, k.type, k.unset, k.help);
    for (const ServerSetting& s : kSettings)
        if (s.per_model)
            out += fmt::format("| `{0}` | {1} | server.{0} | This model's server.{0} (above). |\n",
                               s.key, server_setting_type(s));
    return out;
}

Expected<ServerConfig> server_config_for(const ServerConfig& server,
                                         const ServedModelEntry& entry) {
    ServerConfig out = server;
    for (const auto& [key, value] : entry.settings) {
        const ServerSetting* s = find_server_setting(key);
        if (!s || !s->per_model)
            return make_error("{}: server.models: '{}' is not a per-model setting", entry.origin,
                              key);
        if (auto set = set_server_setting(out, *s, value); !set)
            return make_error("{}: server.models: {}", entry.origin, set.error().message());
    }
    return out;
}

}  // namespace ferrox
