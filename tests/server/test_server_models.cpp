// server.models (docs/config.md, "server.models"): a list of models with their
// own ids and settings, read and checked like every other setting (positions,
// did-you-mean, ranges from the server table), and the list the server makes
// of it and of models_dir (server/model_list.h): ids unique, files trusted.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ferrox/config.h"
#include "ferrox/server_settings.h"
#include "model_list.h"

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The error of parsing `yaml` as t.yaml; "" when it parsed.
std::string error_of(const std::string& yaml) {
    auto config = ferrox::parse_config(yaml, "t.yaml");
    return config ? std::string() : config.error().message();
}

constexpr const char* kTwoModels =
    "backends:\n"
    "  order: [cpu, cuda]\n"
    "server:\n"
    "  context: 1024\n"
    "  models:\n"
    "    - path: /m/qwen.gguf\n"
    "      alias: [chat, qwen]\n"
    "      context: 2048\n"
    "      kv_type: q8_0\n"
    "      model_draft: /m/qwen-small.gguf\n"
    "      backends: [cpu]\n"
    "    - path: llama.gguf\n"
    "      alias: small\n"
    "      parallel: 2\n"
    "      embedding_truncation: true\n"
    "      keep_alive: -1\n";

}  // namespace

TEST_CASE("server.models reads each entry's path, ids, settings and backends, with its line") {
    auto config = ferrox::parse_config(kTwoModels, "t.yaml");
    REQUIRE(config);
    const auto& models = config->server.models;
    REQUIRE(models.size() == 2);
    CHECK(models[0].path == "/m/qwen.gguf");
    CHECK(models[0].ids == std::vector<std::string>{"chat", "qwen"});
    CHECK(models[0].backend_order == std::vector<std::string>{"cpu"});
    CHECK(models[0].origin == "t.yaml:6");
    CHECK(models[1].ids == std::vector<std::string>{"small"});
    CHECK(models[1].backend_order.empty());
    CHECK(models[1].origin == "t.yaml:12");
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    CHECK(models[0].settings ==
          Pairs{{"context", "2048"}, {"kv_type", "q8_0"}, {"model_draft", "/m/qwen-small.gguf"}});
    CHECK(models[1].settings ==
          Pairs{{"parallel", "2"}, {"embedding_truncation", "true"}, {"keep_alive", "-1"}});

    // Each model's settings: the server's with its own on top.
    auto first = ferrox::server_config_for(config->server, models[0]);
    REQUIRE(first);
    CHECK(first->context == 2048);
    CHECK(first->kv_type == "q8_0");
    CHECK(first->parallel == 4);
    CHECK(first->model_draft == "/m/qwen-small.gguf");
    auto second = ferrox::server_config_for(config->server, models[1]);
    REQUIRE(second);
    CHECK(second->context == 1024);  // the server's
    CHECK(second->parallel == 2);
    CHECK(second->embedding_truncation);
    CHECK(second->kv_type == "f32");
    CHECK(second->keep_alive == -1);
    // No draft: the server's (none).
    CHECK(second->model_draft.empty());
    CHECK(first->keep_alive == config->server.keep_alive);  // the server's

    // An empty list is none; a one-id alias may be a plain string.
    auto none = ferrox::parse_config("server:\n  models:\n", "t.yaml");
    REQUIRE(none);
    CHECK(none->server.models.empty());
}

TEST_CASE("a bad server.models entry is refused at its line, naming the field") {
    const std::string head = "server:\n  models:\n    - path: /m/a.gguf\n";
    // A misspelt key: did you mean, at the key's line and column.
    CHECK(error_of(head + "      contxt: 512\n") ==
          "t.yaml:4:7: unknown key 'contxt' in server.models[0]; did you mean 'context'?");
    CHECK(error_of(head + "      aliases: x\n") ==
          "t.yaml:4:7: unknown key 'aliases' in server.models[0]; did you mean 'alias'?");
    // A server setting that is not per-model: the valid keys, and why.
    const std::string host = error_of(head + "      host: 0.0.0.0\n");
    CHECK(host.rfind("t.yaml:4:7: unknown key 'host' in server.models[0]; valid keys are 'path', "
                     "'alias', 'backends', 'parallel', 'context', 'kv_type', 'kv_type_k', "
                     "'kv_type_v', 'max_queue', ",
                     0) == 0);
    CHECK(host.find("(the other server settings apply to every model)") != std::string::npos);
    // Ranges and choices come from the server table, named by the entry's path.
    CHECK(error_of(head + "      context: 2000000\n") ==
          "t.yaml:4:16: server.models[0].context must be between 0 and 1048576, got 2000000");
    CHECK(error_of(head + "      parallel: 0\n") ==
          "t.yaml:4:17: server.models[0].parallel must be between 1 and 64, got 0");
    CHECK(error_of(head + "      kv_type: q8\n") ==
          "t.yaml:4:16: server.models[0].kv_type must be one of 'f32', 'f16', 'q8_0', 'q4_0', "
          "got 'q8'; did you mean 'q8_0'?");
    // The second entry's line.
    CHECK(error_of(head + "    - path: /m/b.gguf\n      parallel: two\n") ==
          "t.yaml:5:17: server.models[1].parallel must be an integer, got 'two'");
    CHECK(error_of("server:\n  models:\n    - alias: a\n") ==
          "t.yaml:3:7: server.models[0] has no path: name the GGUF file");
    CHECK(error_of("server:\n  models: /m/a.gguf\n") ==
          "t.yaml:2:11: server.models must be a list of models (each a map with path, alias, "
          "...), got '/m/a.gguf'");
    CHECK(error_of("server:\n  models:\n    - /m/a.gguf\n") ==
          "t.yaml:3:7: server.models[0] must be a map (path, alias, ...), got '/m/a.gguf'");
    CHECK(error_of(head + "      alias: []\n") ==
          "t.yaml:4:14: server.models[0].alias must be an id or a non-empty list of ids, got a "
          "list");
    CHECK(error_of(head + "      alias: [a, a]\n") ==
          "t.yaml:4:18: server.models[0].alias lists 'a' twice");
    CHECK(error_of(head + "      alias: \"a\\tb\"\n") ==
          "t.yaml:4:14: server.models[0].alias: the id 'a\\tb' holds a control character");
    CHECK(error_of(head + "      backends: [cuda]\n") ==
          "t.yaml:4:17: server.models[0].backends lists 'cuda', which backends.order ('cpu') "
          "does not: a model picks among the backends opened");
    CHECK(error_of(head + "      backends: []\n") ==
          "t.yaml:4:17: server.models[0].backends is empty; list at least one backend, e.g. "
          "[cpu]");
    CHECK(error_of(head + "      path: /m/b.gguf\n") ==
          "t.yaml:4:7: duplicate key 'path' in server.models[0] (first at line 3)");
    // One id, two models: both entries named.
    CHECK(error_of(head + "      alias: [x, y]\n    - path: /m/b.gguf\n      alias: y\n") ==
          "t.yaml:5:7: server.models[1] answers to 'y', as server.models[0] (t.yaml:3) does; an "
          "id names one model");
    // Unknown key in the server section now offers models too.
    CHECK(error_of("server:\n  modles: []\n") ==
          "t.yaml:2:3: unknown key 'modles' in section 'server'; did you mean 'models'?");
}

TEST_CASE("docs/config.md's server.models table is the one the settings tables render") {
    const std::string docs = read_text(FERROX_TEST_DATA_DIR "/../../docs/config.md");
    REQUIRE(!docs.empty());
    const std::string table = ferrox::model_entries_markdown();
    INFO("docs/config.md must hold, under ### `server.models`, exactly:\n" << table);
    CHECK(docs.find(table) != std::string::npos);
    // The per-model keys are rows of the server table: one source for ranges and help.
    for (const std::string& key : ferrox::model_entry_key_names()) {
        INFO(key);
        CHECK(table.find("| `" + key + "` |") != std::string::npos);
    }
}

namespace {

// A private folder (0700) under the temporary folder, removed at the end.
struct TempFolder {
    TempFolder() {
        std::string pattern = (fs::temp_directory_path() / "ferrox-models-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempFolder() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    fs::path file(const std::string& name, mode_t mode = 0644) const {
        const fs::path p = path / name;
        std::ofstream(p) << "GGUF";
        ::chmod(p.c_str(), mode);
        return p;
    }
    fs::path path;
};

ferrox::ServedModelEntry entry(std::string path, std::vector<std::string> ids, int line) {
    ferrox::ServedModelEntry e;
    e.path = std::move(path);
    e.ids = std::move(ids);
    e.origin = "t.yaml:" + std::to_string(line);
    return e;
}

}  // namespace

TEST_CASE("the served list: entries first, then models_dir's files no entry names") {
    TempFolder dir;
    dir.file("qwen.gguf");
    dir.file("llama.gguf");
    TempFolder other;
    const fs::path outside = other.file("gemma.gguf");
    ferrox::ServerConfig s;
    s.models_dir = dir.path.string();
    s.models = {entry("qwen.gguf", {"chat", "q"}, 3), entry(outside.string(), {}, 5)};
    auto specs = ferrox::server::served_model_specs(s);
    REQUIRE(specs);
    REQUIRE(specs->size() == 3);
    CHECK((*specs)[0].id == "chat");
    CHECK((*specs)[0].aliases == std::vector<std::string>{"q"});
    CHECK((*specs)[0].entry == 0u);
    CHECK((*specs)[0].file_bytes == 4);
    CHECK((*specs)[1].id == "gemma");  // no alias: the file name without .gguf
    CHECK((*specs)[1].entry == 1u);
    CHECK((*specs)[2].id == "llama");  // the folder's, without an entry
    CHECK(!(*specs)[2].entry);         // qwen.gguf is the entry's, not also "qwen"

    SECTION("an id of an entry and of a folder file: both named") {
        s.models = {entry(outside.string(), {"llama"}, 7)};
        auto clash = ferrox::server::served_model_specs(s);
        REQUIRE(!clash);
        CHECK(clash.error().message() ==
              "the file llama.gguf of models_dir answers to 'llama', as server.models[0] "
              "(t.yaml:7) does; an id names one model");
    }
    SECTION("two entries of the same file name, no alias") {
        s.models_dir.clear();
        s.models = {entry(outside.string(), {}, 3), entry(outside.string(), {}, 9)};
        auto clash = ferrox::server::served_model_specs(s);
        REQUIRE(!clash);
        CHECK(clash.error().message() ==
              "server.models[1] (t.yaml:9) answers to 'gemma', as server.models[0] (t.yaml:3) "
              "does; an id names one model");
    }
    SECTION("a relative path needs models_dir, and stays inside it") {
        s.models = {entry("../x.gguf", {}, 4)};
        auto out = ferrox::server::served_model_specs(s);
        REQUIRE(!out);
        CHECK(out.error().message().find("server.models[0] (t.yaml:4): the path '../x.gguf' "
                                         "leads outside models_dir") == 0);
        s.models_dir.clear();
        s.models = {entry("qwen.gguf", {}, 4)};
        auto relative = ferrox::server::served_model_specs(s);
        REQUIRE(!relative);
        CHECK(relative.error().message().find("server.models[0] (t.yaml:4): the path 'qwen.gguf' "
                                              "is relative") == 0);
    }
    SECTION("an entry's file passes models_dir's trust rule") {
        const fs::path writable = other.file("open.gguf", 0664);
        s.models = {entry(writable.string(), {}, 6)};
        auto refused = ferrox::server::served_model_specs(s);
        REQUIRE(!refused);
        INFO(refused.error().message());
        CHECK(refused.error().message().find("server.models[0] (t.yaml:6): refused: ") == 0);
        CHECK(refused.error().message().find("is group-writable (mode 664)") != std::string::npos);
    }
}
