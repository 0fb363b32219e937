// `ferrox serve`: the OpenAI-compatible HTTP server (docs/server.md). The
// listener starts first (so /health answers and /ready says "loading"),
// then the model loads and the scheduler starts. SIGTERM or SIGINT drains:
// /ready turns 503, nothing new is taken, running requests get
// server.drain_timeout to finish, the rest are cancelled, exit 0. A second
// signal exits at once.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>

#include "auth.h"
#include "commands/commands.h"
#include "commands/serve_models.h"
#include "commands/served_model.h"
#include "ferrox/log.h"
#include "ferrox/server_settings.h"
#include "format.h"
#include "http_server.h"
#include "metrics.h"
#include "model_reference.h"
#include "model_session.h"
#include "openai_api.h"
#include "otlp_exporter.h"
#include "scheduler.h"

namespace ferrox::cli {
namespace {

struct ServeOptions {
    // The server flags, declared from the settings table: each one's text as
    // given, checked by the same rule as the configuration file's key.
    std::map<std::string_view, std::string> text;
    std::map<std::string_view, bool> switches;
    std::map<std::string_view, CLI::Option*> given;
    unsigned threads = 0;
    ChatOptions chat;
    ModelSourceFlags source;
};

// The configuration's server section with every given flag on top.
Expected<ServerConfig> merged(const ServerConfig& from_config, const ServeOptions& o) {
    ServerConfig s = from_config;
    for (const ServerSetting& setting : server_settings()) {
        if (o.given.at(setting.key)->count() == 0) continue;
        const std::string value = setting.kind == SettingKind::Switch
                                      ? (o.switches.at(setting.key) ? "true" : "false")
                                      : o.text.at(setting.key);
        auto set = set_server_setting(s, setting, value);
        if (!set) {
            const std::string_view flags = setting.flags;
            return make_error("{}: {}", flags.substr(flags.rfind(',') + 1), set.error().message());
        }
    }
    return s;
}

// Signals arrive at one thread (sigwait), never inside the engine's threads.
class SignalWatch {
  public:
    SignalWatch() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGTERM);
        sigaddset(&set_, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // every thread started later inherits it
        thread_ = std::thread([this] { watch(); });
        thread_.detach();
    }
    // Waits for the first signal.
    void wait() {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return count_ > 0; });
    }
    bool signalled() {
        std::lock_guard lock(m_);
        return count_ > 0;
    }
    std::atomic<bool> exit_at_once_on_first{true};  // while loading: nothing to drain

  private:
    void watch() {
        for (;;) {
            int sig = 0;
            if (sigwait(&set_, &sig) != 0) continue;
            int n;
            {
                std::lock_guard lock(m_);
                n = ++count_;
            }
            if (n == 1 && exit_at_once_on_first) {
                logger().info("serve: {} while loading; exiting", strsignal(sig));
                logger().flush();
                ::_exit(0);
            }
            if (n >= 2) {
                logger().warn("serve: second {}; exiting without finishing requests",
                              strsignal(sig));
                logger().flush();
                ::_exit(1);
            }
            logger().info("serve: {}: draining", strsignal(sig));
            cv_.notify_all();
        }
    }
    sigset_t set_;
    std::thread thread_;
    std::mutex m_;
    std::condition_variable cv_;
    int count_ = 0;
};

// A server that cannot start marks itself failed (/health says so) and logs why.
int start_failed(server::Api& api, std::string_view why, int status) {
    api.set_state(server::ServerState::Failed);
    logger().error("serve: {}", why);
    return status;
}

// Many models: ready at once (each model loads on its first request); drains
// every loaded model on the first signal.
int serve_many(ServedModels& models, const ServerConfig& s, server::Api& api,
               server::HttpServer& http, SignalWatch& signals,
               std::optional<server::TraceExporter>& traces) {
    signals.exit_at_once_on_first = false;
    api.set_state(signals.signalled() ? server::ServerState::Draining : server::ServerState::Ready);
    logger().info("serve: listening on http://{}:{}; ready: models load on their first request",
                  s.host, http.port());
    signals.wait();
    api.set_state(server::ServerState::Draining);
    const bool drained =
        models.registry->drain(server::Clock::now() + std::chrono::seconds(s.drain_timeout));
    http.wait_handlers_done(std::chrono::milliseconds(5000));
    http.stop(std::chrono::milliseconds(3000));
    models.registry.reset();  // stops every scheduler, frees every model
    if (traces) traces->flush_and_stop(server::Clock::now() + traces->options().timeout);
    logger().info("serve: stopped{}", drained ? "" : " (requests were cancelled)");
    if (http.open_connections() > 0) {
        logger().flush();
        ::_exit(kExitOk);
    }
    return kExitOk;
}

int run(const CommonOptions& common, const ServeOptions& o) {
    auto config = load_session_config(common);
    if (!config) {
        logger().error("{}", config.error().message());
        return kExitBadInput;
    }
    const auto merged_config = merged(config->server, o);
    if (!merged_config) {
        logger().error("serve: {}", merged_config.error().message());
        return kExitBadInput;
    }
    ServerConfig s = *merged_config;
    const bool many = !s.models_dir.empty() || !s.models.empty();
    if (s.model.empty() && !many) {
        logger().error(
            "serve: no model: give -m FILE or --models-dir DIR, or set server.model or "
            "server.models in the configuration");
        return kExitBadInput;
    }
    if (!s.model.empty() && many) {
        logger().error(
            "serve: give either a model (-m, server.model) or many (--models-dir, "
            "server.models), not both");
        return kExitBadInput;
    }
    // A model reference is the stored file, found before the port opens; the
    // network only with --pull.
    std::string model_path = s.model;
    if (!many) {
        if (const int status = resolve_model_argument(model_path, o.source, "--model");
            status != kExitOk)
            return status;
    }
    if (many && !s.model_draft.empty()) {
        logger().error(
            "serve: server.model_draft (--model-draft) drafts for one model; with "
            "--models-dir or server.models, a server.models entry names its own model_draft");
        return kExitBadInput;
    }
    std::string draft_path = s.model_draft;
    if (!draft_path.empty()) {
        if (const int status = resolve_model_argument(draft_path, o.source, "--model-draft");
            status != kExitOk)
            return status;
    }
    // So is each server.models entry's (a relative path names a file of models_dir).
    for (size_t i = 0; i < s.models.size(); ++i) {
        ServedModelEntry& entry = s.models[i];
        const std::string who = fmt::format("server.models[{}] ({})", i, entry.origin);
        if (const int status = resolve_model_argument(entry.path, o.source, who, s.models_dir);
            status != kExitOk)
            return status;
        // Its draft model the same way (the value server_config_for applies),
        // a relative path a file of models_dir when one is set.
        for (auto& [key, value] : entry.settings) {
            if (key != "model_draft") continue;
            if (const int status =
                    resolve_model_argument(value, o.source, who + " model_draft", s.models_dir);
                status != kExitOk)
                return status;
            if (!s.models_dir.empty() && std::filesystem::path(value).is_relative())
                value = (std::filesystem::path(s.models_dir) / value).string();
        }
    }
    auto keys = server::load_api_keys(s.api_key_file);
    if (!keys) {
        logger().error("serve: {}", keys.error().message());
        return kExitBadInput;
    }
    if (keys->empty() && !s.insecure_open && !server::is_loopback_host(s.host)) {
        logger().error(
            "serve: server.host '{}' is not a loopback address and no API key is set: give "
            "--api-key-file (or $FERROX_API_KEY), or --insecure-open to serve anyone who can "
            "reach it",
            s.host);
        return kExitBadInput;
    }
    server::ApiOptions api_options;
    auto origin = server::checked_origin(s.cors_origin);
    auto hosts = server::checked_host_list(s.allowed_hosts);
    if (!origin || !hosts) {
        logger().error("serve: {}", (!origin ? origin.error() : hosts.error()).message());
        return kExitBadInput;
    }
    api_options.guard.cors_origin = std::move(*origin);
    api_options.guard.allowed_hosts = std::move(*hosts);
    // The name it was asked to bind is one of its names (an address needs no entry).
    if (auto bound = server::checked_host_list(s.host); bound && bound->size() == 1)
        api_options.guard.allowed_hosts.push_back(bound->front());
    auto trace_options = server::trace_export_options(s.otlp_endpoint);
    if (!trace_options) {
        logger().error("serve: {}", trace_options.error().message());
        return kExitBadInput;
    }
    SignalWatch signals;
    server::Metrics metrics;
    // Declared before the API that hands it spans, so it outlives every request.
    std::optional<server::TraceExporter> traces;
    if (*trace_options) {
        traces.emplace(std::move(**trace_options), metrics.traces);
        api_options.traces = &*traces;
        logger().info("serve: traces go to {} as service '{}'", traces->options().url,
                      traces->options().service_name);
    }
    api_options.model_id =
        s.alias.empty() ? std::filesystem::path(model_path).filename().string() : s.alias;
    api_options.api_keys = std::move(*keys);
    api_options.request_timeout = std::chrono::seconds(s.request_timeout);
    api_options.reasoning_budget = s.reasoning_budget;
    // Many models: the folder is checked before the port opens.
    std::optional<ServedModels> models;
    if (many) {
        auto opened = open_models_dir(common, s, o.chat.chat_template, o.threads, metrics);
        if (!opened) {
            logger().error("serve: {}", opened.error().message());
            return kExitBadInput;
        }
        models.emplace(std::move(*opened));
        api_options.models = models->registry.get();
    }
    server::Api api(api_options, metrics);
    const server::HttpLimits limits = server::http_limits(s);
    server::HttpServer http(
        limits,
        [&api](const server::HttpRequest& r, server::Responder& out) { api.handle(r, out); },
        server::transport_error_body);
    if (auto started = http.start(s.host, static_cast<uint16_t>(s.port)); !started) {
        logger().error("serve: {}", started.error().message());
        return kExitFailure;
    }
    if (models) return serve_many(*models, s, api, http, signals, traces);
    logger().info("serve: listening on http://{}:{} ({} API keys); loading {}", s.host, http.port(),
                  api_options.api_keys.size(), model_path);

    OpenFailure why = OpenFailure::None;
    auto engine = open_engine(common, model_path, serve_model_choices(s, o.threads), &why);
    if (!engine) return start_failed(api, engine.error().message(), exit_status(why));
    // server.model_draft: the model that drafts; it outlives `served` (declared first).
    std::optional<std::unique_ptr<Engine>> draft_engine;
    if (!draft_path.empty()) {
        auto opened = open_engine(common, draft_path, serve_model_choices(s, o.threads), &why);
        if (!opened) return start_failed(api, opened.error().message(), exit_status(why));
        draft_engine = std::move(*opened);
    }
    auto served = make_served_model(**engine, s, o.chat.chat_template, metrics, nullptr,
                                    draft_engine ? draft_engine->get() : nullptr);
    if (!served) return start_failed(api, served.error().message(), kExitBadInput);
    api.set_model((*served)->api());
    signals.exit_at_once_on_first = false;
    api.set_state(signals.signalled() ? server::ServerState::Draining : server::ServerState::Ready);
    logger().info("serve: ready: {}", (*served)->summary());

    signals.wait();
    // Connections are still accepted while draining, so that /ready answers
    // 503 (a router takes the replica out) and new work is refused by status.
    api.set_state(server::ServerState::Draining);
    (*served)->begin_drain();
    const bool drained =
        (*served)->wait_idle(server::Clock::now() + std::chrono::seconds(s.drain_timeout));
    if (!drained)
        logger().warn("serve: server.drain_timeout ({} s) passed; cancelling what still runs",
                      s.drain_timeout);
    (*served)->stop();
    // Every answer is complete in the scheduler; let the connections send the rest.
    http.wait_handlers_done(std::chrono::milliseconds(5000));
    http.stop(std::chrono::milliseconds(3000));
    // The drained requests' spans: sent now, for at most the exporter's timeout.
    if (traces) traces->flush_and_stop(server::Clock::now() + traces->options().timeout);
    logger().info("serve: stopped{}", drained ? "" : " (requests were cancelled)");
    if (http.open_connections() > 0) {  // a thread still holds a connection: do not unwind under it
        logger().flush();
        ::_exit(kExitOk);
    }
    return kExitOk;
}

}  // namespace

Command add_serve_command(CLI::App& app, CommonOptions& common) {
    auto* cmd = app.add_subcommand(
        "serve", "OpenAI-compatible HTTP server with continuous batching (docs/server.md)");
    auto o = std::make_shared<ServeOptions>();
    for (const ServerSetting& setting : server_settings()) {
        const std::string help =
            fmt::format("{} (default {})", setting.help, server_setting_default(setting));
        const std::string names(setting.flags);
        if (setting.kind == SettingKind::Switch) {
            o->given[setting.key] = cmd->add_flag(names, o->switches[setting.key], help);
        } else {
            std::string type = server_setting_type(setting);
            std::erase(type, '`');  // Markdown quoting, for the docs' table
            o->given[setting.key] =
                cmd->add_option(names, o->text[setting.key], help)->type_name(type);
        }
    }
    add_threads_flag(*cmd, o->threads);
    add_chat_template_option(*cmd, o->chat.chat_template);
    add_model_source_flags(*cmd, o->source);
    return {cmd, [o, &common]() { return run(common, *o); }};
}

}  // namespace ferrox::cli
