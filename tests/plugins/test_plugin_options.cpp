// Plugins declare their options through describe() (ABI 1.6); the loader checks
// a backend section against that declaration before create() runs.
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "options.h"  // plugins/cuda: the CUDA plugin's declaration, built without CUDA
#include "plugin_env.h"

using namespace ferrox;
using namespace ferrox::test;

namespace {

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

PluginSet load_one(const TempDir& dir, std::string_view name, std::string_view yaml) {
    install_plugin(fixture(name), dir.path());
    return PluginSet::load(config_from(yaml), only_folder(dir.path()));
}

// The table docs/config.md shows for a plugin's declaration.
std::string docs_table(std::span<const ferrox_option_spec> specs) {
    ferrox_plugin_info info{};
    info.struct_size = sizeof info;
    info.abi_version = FERROX_ABI_VERSION;
    info.option_spec_size = sizeof(ferrox_option_spec);
    info.n_options = static_cast<uint32_t>(specs.size());
    info.options = specs.data();
    auto declared = read_declared_options(info);
    REQUIRE(declared.has_value());
    return option_schema_markdown(*declared);
}

}  // namespace

TEST_CASE("a declared section reaches create() normalised, followed by the declared defaults") {
    TempDir dir;
    const auto set = load_one(dir, "schema",
                              "backends: {order: [schema]}\nschema:\n  budget: 2KiB\n"
                              "  lanes: '+8'\n");
    const auto& r = record_of(set, "schema");
    REQUIRE(r.state == PluginState::Ready);
    REQUIRE(r.options.size() == 3);
    CHECK(r.options[0].key == "lanes");
    CHECK(r.options[0].max == 16);
    // The fixture names its device after the options create() received.
    REQUIRE(r.devices.size() == 1);
    CHECK(r.devices[0].name == "budget=2048;lanes=8;mode=exact;");
}

TEST_CASE("an out-of-range value is refused before create(), naming file:line:col, key, range") {
    TempDir dir;
    const auto set = load_one(dir, "schema", "backends: {order: [schema]}\nschema:\n  lanes: 17\n");
    const auto& r = record_of(set, "schema");
    CHECK(r.state == PluginState::BadOptions);
    CHECK(r.reason == "test.yaml:3:10: schema.lanes must be between 1 and 16, got 17");
    CHECK(r.backend == nullptr);
    CHECK(r.devices.empty());  // create() never ran
    REQUIRE(set.option_errors().size() == 1);
    CHECK(set.option_errors()[0]->name == "schema");
    CHECK(state_name(r.state) == "bad-options");
}

TEST_CASE("an undeclared key or a wrong word is refused with where it was written") {
    // A folder each: a copy over a library still loaded would pull its pages away.
    TempDir dir, other;
    const auto typo = load_one(dir, "schema", "backends: {order: [schema]}\nschema:\n  lane: 2\n");
    CHECK(record_of(typo, "schema").reason ==
          "test.yaml:3:3: unknown key 'lane' in section 'schema'; did you mean 'lanes'?");
    const auto word =
        load_one(other, "schema", "backends: {order: [schema]}\nschema:\n  mode: slow\n");
    CHECK(record_of(word, "schema").reason ==
          "test.yaml:3:9: schema.mode must be one of 'fast', 'exact', got 'slow'");
}

TEST_CASE("a plugin that declares no options gets its section's scalars as written") {
    TempDir dir;
    const auto set =
        load_one(dir, "echo", "backends: {order: [echo]}\necho:\n  zeta: Last\n  alpha: '+1'\n");
    const auto& r = record_of(set, "echo");
    REQUIRE(r.state == PluginState::Ready);
    CHECK(r.options.empty());
    REQUIRE(r.devices.size() == 1);
    CHECK(r.devices[0].name == "zeta=Last;alpha=+1;");
}

TEST_CASE("a malformed declaration refuses the plugin, naming the option") {
    TempDir dir;
    const auto set = load_one(dir, "badschema", "backends: {order: [badschema]}\n");
    const auto& r = record_of(set, "badschema");
    CHECK(r.state == PluginState::InitFailed);
    CHECK(r.reason ==
          "describe() declares malformed options: option 0: its default must be between 1 and "
          "16, got 99");
}

TEST_CASE("read_declared_options refuses what it cannot trust") {
    const ferrox_option_spec good{"k", FERROX_OPTION_INTEGER, 0, 3, nullptr, "1", "K."};
    ferrox_option_spec specs[2] = {good, good};
    ferrox_plugin_info info{};
    info.struct_size = sizeof info;
    info.abi_version = FERROX_ABI_VERSION;
    info.option_spec_size = sizeof(ferrox_option_spec);
    info.n_options = 2;
    info.options = specs;
    auto error_of = [&] {
        auto r = read_declared_options(info);
        REQUIRE_FALSE(r.has_value());
        return r.error().message();
    };
    CHECK(error_of() == "option 1: key 'k' is declared twice");
    specs[1].key = "required";
    CHECK(error_of() == "option 1: 'required' is the core's key, not a plugin's");
    specs[1].key = "Bad-Key";
    CHECK_THAT(error_of(), Catch::StartsWith("option 1: its key must be"));
    specs[1] = good;
    specs[1].key = "j";
    specs[1].min = 4;
    CHECK(error_of() == "option 1: range 4..3 is empty or, for a size, negative");
    specs[1] = {"j", FERROX_OPTION_CHOICE, 0, 0, "a||b", nullptr, ""};
    CHECK(error_of() == "option 1: an empty word in choices 'a||b'");
    specs[1] = {"j", static_cast<ferrox_option_kind>(7), 0, 0, nullptr, nullptr, ""};
    CHECK(error_of() == "option 1: kind 7 is not one this ferrox knows");
    info.n_options = FERROX_MAX_OPTIONS + 1;
    CHECK(error_of() == "it declares 65 options, more than the 64 allowed");
    info.n_options = 1;
    info.option_spec_size = 8;
    CHECK_THAT(error_of(), Catch::StartsWith("option_spec_size 8 is outside"));
    // A 1.5 plugin cannot have declared any: nothing is read.
    info.abi_version = (1u << 16) | 5u;
    CHECK(read_declared_options(info)->empty());
}

TEST_CASE("the CPU plugin declares threads and isa, and a file or flag past its range is refused") {
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set =
        PluginSet::load(config_from("cpu:\n  threads: 2000\n"), only_folder(dir.path()));
    const auto& r = record_of(set, "cpu");
    CHECK(r.state == PluginState::BadOptions);
    CHECK(r.reason == "test.yaml:2:12: cpu.threads must be between 0 and 1024, got 2000");
    Config flagged = config_from("cpu:\n  isa: portable\n");
    flagged.backends[0].set_option("threads", "1025", "--threads");
    const auto by_flag = PluginSet::load(flagged, only_folder(dir.path()));
    CHECK(record_of(by_flag, "cpu").reason ==
          "--threads: cpu.threads must be between 0 and 1024, got 1025");
}

TEST_CASE("docs/config.md's cpu and cuda tables are the plugins' declarations") {
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set = PluginSet::load(config_from(""), only_folder(dir.path()));
    const auto& cpu = record_of(set, "cpu");
    REQUIRE(cpu.state == PluginState::Ready);
    const std::string docs = read_text(FERROX_CONFIG_DOCS);
    const std::string cpu_table = option_schema_markdown(cpu.options);
    INFO("docs/config.md must hold under ### `cpu`:\n" << cpu_table);
    CHECK(docs.find("### `cpu`\n\n" + cpu_table) != std::string::npos);
    const std::string cuda_table = docs_table(cuda::declared_options());
    INFO("docs/config.md must hold under ### `cuda`:\n" << cuda_table);
    CHECK(docs.find(cuda_table) != std::string::npos);
}

TEST_CASE("the shipped ferrox.yaml spells out the cpu and cuda plugins' declared defaults") {
    // cuda is listed so that its section reaches the backends list.
    std::string text = read_text(FERROX_SHIPPED_CONFIG);
    const size_t order = text.find("order: [cpu]");
    REQUIRE(order != std::string::npos);
    text.replace(order, 12, "order: [cpu, cuda]");
    const Config shipped = config_from(text);
    TempDir dir;
    install_plugin(real_plugin("cpu"), dir.path());
    const auto set = PluginSet::load(config_from(""), only_folder(dir.path()));
    ferrox_plugin_info cuda_info{};
    cuda_info.struct_size = sizeof cuda_info;
    cuda_info.abi_version = FERROX_ABI_VERSION;
    cuda_info.option_spec_size = sizeof(ferrox_option_spec);
    cuda_info.n_options = static_cast<uint32_t>(cuda::declared_options().size());
    cuda_info.options = cuda::declared_options().data();
    const auto cuda_declared = read_declared_options(cuda_info);
    REQUIRE(cuda_declared.has_value());
    for (const auto& [name, declared] :
         {std::pair{std::string("cpu"), record_of(set, "cpu").options},
          std::pair{std::string("cuda"), *cuda_declared}}) {
        INFO("section " << name);
        REQUIRE(!declared.empty());
        const BackendConfig* section = shipped.backend(name);
        REQUIRE(section != nullptr);
        std::vector<std::pair<std::string, std::string>> defaults;
        for (const OptionSpec& spec : declared)
            if (spec.default_value) defaults.emplace_back(spec.key, *spec.default_value);
        CHECK(section->options == defaults);
    }
}
