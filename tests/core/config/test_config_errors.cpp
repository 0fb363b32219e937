// Invalid files: every error names file:line:column and says what is wrong.
#include <regex>
#include <string>

#include "config_test_support.h"
#include "ferrox/config.h"

namespace {

std::string error_of(std::string_view text) {
    const auto config = ferrox::parse_config(text, "bad.yaml");
    if (config) FAIL("expected an error for:\n" << text);
    return config.error().message();
}

bool starts_with(const std::string& text, std::string_view prefix) {
    return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

TEST_CASE("malformed YAML is reported at yaml-cpp's position") {
    const std::string message = error_of("cpu:\n  threads: 2\nbackends:\n  order: [cpu, cuda\n");
    INFO(message);
    CHECK(std::regex_search(message, std::regex(R"(^bad\.yaml:[45]:\d+: malformed YAML: \S)")));

    // The "- x" at line 3, column 3 cannot continue the map above it.
    CHECK(error_of("cpu:\n  threads: 2\n  - x\n") ==
          "bad.yaml:3:3: malformed YAML: end of map not found");
}

TEST_CASE("YAML nested past the depth limit is refused where the first collection too deep opens") {
    // The root map is level 1, backends' map 2, so the 63rd '[' opens level 65.
    const std::string flow =
        "backends:\n  order: " + std::string(600, '[') + std::string(600, ']') + "\n";
    CHECK(error_of(flow) ==
          "bad.yaml:2:72: YAML collections nested deeper than 64 levels (the limit for a "
          "configuration file) start here");
    // Block maps: level k's key sits on line k at column 2k-1; level 65 opens on line 65.
    std::string block;
    for (int level = 0; level < 80; ++level) block += std::string(2 * level, ' ') + "k:\n";
    const std::string message = error_of(block);
    CHECK_THAT(message,
               Catch::StartsWith("bad.yaml:65:129: YAML collections nested deeper than 64"));
    // 64 levels are fine as YAML (the parser then refuses the unknown key).
    std::string ok;
    for (int level = 0; level < 64; ++level) ok += std::string(2 * level, ' ') + "k:\n";
    CHECK_THAT(error_of(ok), Catch::Contains("unknown key 'k'"));
}

TEST_CASE("an unknown key is named with a did-you-mean suggestion from the keys valid there") {
    CHECK(error_of("backend:\n  order: [cpu]\n") ==
          "bad.yaml:1:1: unknown key 'backend' at the top level; did you mean 'backends'?");
    CHECK(error_of("plugins:\n  create_timout: 5\n") ==
          "bad.yaml:2:3: unknown key 'create_timout' in section 'plugins'; did you mean "
          "'create_timeout'?");
    CHECK(error_of("log:\n  levle: info\n") ==
          "bad.yaml:2:3: unknown key 'levle' in section 'log'; did you mean 'level'?");
    // A third-party backend's name is a valid top-level key once it is listed.
    CHECK(error_of("backends:\n  order: [rocm_x, cpu]\nrocm_y:\n  a: 1\n") ==
          "bad.yaml:3:1: unknown key 'rocm_y' at the top level; did you mean 'rocm_x'?");
}

TEST_CASE("an unknown key with nothing close lists the valid keys") {
    CHECK(error_of("registry:\n  paranoid: true\n") ==
          "bad.yaml:2:3: unknown key 'paranoid' in section 'registry'; valid keys are 'strict'");
    CHECK(error_of("plugins:\n  numa_policy: interleave\n") ==
          "bad.yaml:2:3: unknown key 'numa_policy' in section 'plugins'; valid keys are "
          "'paths', 'allow_without_note', 'create_timeout'");
}

TEST_CASE("a section for a backend that backends.order does not list is refused") {
    CHECK(error_of("\nmy_npu:\n  required: true\n") ==
          "bad.yaml:2:1: unknown key 'my_npu' at the top level; valid keys are 'plugins', "
          "'backends', 'cpu', 'cuda', 'registry', 'log', 'server' (a section for a third-party "
          "backend is allowed only when backends.order lists it)");
}

TEST_CASE("a value of the wrong type names the key, the expected type and what was found") {
    // A backend option's kind is its plugin's to check (test_config_options); here it
    // only has to be a single value.
    CHECK(error_of("cpu:\n  threads: [1]\n") ==
          "bad.yaml:2:12: cpu.threads must be a single value (text, number or true/false), got "
          "a list");
    CHECK(error_of("cpu:\n  threads:\n") ==
          "bad.yaml:2:3: cpu.threads must be a single value (text, number or true/false), got "
          "nothing (an empty value)");
    CHECK(error_of("cpu:\n  required: yes\n") ==
          "bad.yaml:2:13: cpu.required must be true or false, got 'yes'");
    CHECK(error_of("registry:\n  strict: 1\n") ==
          "bad.yaml:2:11: registry.strict must be true or false, got '1'");
    CHECK(error_of("plugins:\n  allow_without_note: 1\n") ==
          "bad.yaml:2:23: plugins.allow_without_note must be true or false, got '1'");
    CHECK_THAT(error_of("plugins:\n  create_timeout: 0\n"),
               Catch::StartsWith("bad.yaml:2:19: plugins.create_timeout must be between 1 and "
                                 "3600"));
    // A NUL would cut the folder name short at the system call: /opt/p searched for /opt/p\0/x.
    CHECK(error_of("plugins:\n  paths: [\"/opt/p\\0/x\"]\n") ==
          "bad.yaml:2:11: plugins.paths entry '/opt/p\\x00/x' holds a NUL byte; a folder name "
          "cannot");
    CHECK(error_of("plugins:\n  paths: /opt/plugins\n") ==
          "bad.yaml:2:10: plugins.paths must be a list of folders, got '/opt/plugins'");
    CHECK(error_of("backends:\n  order: cpu\n") ==
          "bad.yaml:2:10: backends.order must be a list of backend names such as [cuda, cpu], "
          "got 'cpu'");
    CHECK(error_of("backends:\n  order: [cpu]\n  \nzz:\n") ==
          "bad.yaml:4:1: unknown key 'zz' at the top level; valid keys are 'plugins', "
          "'backends', 'cpu', 'cuda', 'registry', 'log', 'server' (a section for a third-party "
          "backend is allowed only when backends.order lists it)");
}

TEST_CASE("a third-party option must be a single value") {
    CHECK(error_of("backends:\n  order: [npu]\nnpu:\n  layers: [1, 2]\n") ==
          "bad.yaml:4:11: npu.layers must be a single value (text, number or true/false), "
          "got a list");
    CHECK(error_of("backends:\n  order: [npu]\nnpu:\n  required: maybe\n") ==
          "bad.yaml:4:13: npu.required must be true or false, got 'maybe'");
}

TEST_CASE("an out-of-range value names the range") {
    CHECK(error_of("plugins:\n  create_timeout: 3601\n") ==
          "bad.yaml:2:19: plugins.create_timeout must be between 1 and 3600, got 3601");
}

TEST_CASE("an unknown log level suggests the closest one") {
    CHECK(error_of("log:\n  level: warning\n") ==
          "bad.yaml:2:10: log.level must be one of 'trace', 'debug', 'info', 'warn', 'error', "
          "'off', got 'warning'; did you mean 'warn'?");
}

TEST_CASE("a backend listed twice in backends.order points at the second and the first") {
    CHECK(error_of("backends:\n  order: [cpu, cuda, cpu]\n") ==
          "bad.yaml:2:22: backend 'cpu' is listed twice in backends.order (first at line 2, "
          "column 11)");
    CHECK(error_of("backends:\n  order:\n    - cuda\n    - cuda\n") ==
          "bad.yaml:4:7: backend 'cuda' is listed twice in backends.order (first at line 3, "
          "column 7)");
}

TEST_CASE("an empty backends.order is refused") {
    CHECK(error_of("backends:\n  order:\n") ==
          "bad.yaml:2:3: backends.order must be a list of backend names such as [cuda, cpu], "
          "got nothing (an empty value)");
    CHECK(error_of("backends:\n  order: []\n") ==
          "bad.yaml:2:10: backends.order is empty; list at least one backend, e.g. [cpu]");
}

TEST_CASE("a backend name outside [a-z0-9_] is refused") {
    CHECK(error_of("backends:\n  order: [cpu, CUDA]\n") ==
          "bad.yaml:2:16: backend name 'CUDA' in backends.order must use only a-z, 0-9 and _");
    CHECK(error_of("backends:\n  order: [cpu, {a: 1}]\n") ==
          "bad.yaml:2:16: backends.order must list backend names, got a map");
}

TEST_CASE("a non-map where a map is expected is refused") {
    CHECK(error_of("cpu: 4\n") == "bad.yaml:1:6: section 'cpu' must be a map of keys, got '4'");
    CHECK(error_of("log: [info]\n") ==
          "bad.yaml:1:6: section 'log' must be a map of keys, got a list");
    CHECK(error_of("- cpu\n- cuda\n") ==
          "bad.yaml:1:1: the configuration must be a map of sections (plugins, backends, cpu, "
          "...), got a list");
    CHECK(error_of("just some words\n") ==
          "bad.yaml:1:1: the configuration must be a map of sections (plugins, backends, cpu, "
          "...), got 'just some words'");
}

TEST_CASE("a duplicate key is refused") {
    CHECK(error_of("cpu:\n  threads: 1\n  threads: 2\n") ==
          "bad.yaml:3:3: duplicate key 'threads' in section 'cpu' (first at line 2)");
    CHECK(error_of("log:\n  level: info\nlog:\n  level: off\n") ==
          "bad.yaml:3:1: duplicate key 'log' at the top level (first at line 1)");
}

TEST_CASE("a key that is not a plain name is refused") {
    CHECK(error_of("cpu:\n  [a, b]: 1\n") ==
          "bad.yaml:2:3: a key in section 'cpu' must be a plain name, got a list");
}

TEST_CASE("a second YAML document is refused") {
    CHECK(error_of("log:\n  level: info\n---\nlog:\n  level: off\n") ==
          "bad.yaml:3:1: a configuration file holds one YAML document; a second one starts here");
}

TEST_CASE("a stray ',' at the top level is malformed YAML, not an endless loop") {
    CHECK(error_of("# a comment\n, and more\n") == "bad.yaml:2:1: malformed YAML: unexpected ','");
}

TEST_CASE("files that cannot be read give an error naming the path") {
    ferrox::test::TempDir dir;
    const auto missing = ferrox::load_config_file(dir.path() / "absent.yaml");
    REQUIRE_FALSE(missing.has_value());
    CHECK(starts_with(missing.error().message(), (dir.path() / "absent.yaml").string() + ": "));
    CHECK(missing.error().message().find("No such file") != std::string::npos);

    const auto folder = ferrox::load_config_file(dir.path());
    REQUIRE_FALSE(folder.has_value());
    CHECK(folder.error().message() ==
          dir.path().string() + ": is a folder, not a configuration file");

    const auto file = dir.path() / "invalid.yaml";
    ferrox::test::write_file(file, "log:\n  level: loud\n");
    const auto invalid = ferrox::load_config_file(file);
    REQUIRE_FALSE(invalid.has_value());
    CHECK(starts_with(invalid.error().message(), file.string() + ":2:10: log.level must be"));
}

TEST_CASE("server keys are checked: unknown keys, ranges, kinds") {
    CHECK(error_of("server:\n  prot: 80\n") ==
          "bad.yaml:2:3: unknown key 'prot' in section 'server'; did you mean 'port'?");
    CHECK(error_of("server:\n  port: 70000\n") ==
          "bad.yaml:2:9: server.port must be between 0 and 65535, got 70000");
    CHECK(error_of("server:\n  parallel: 0\n") ==
          "bad.yaml:2:13: server.parallel must be between 1 and 64, got 0");
    CHECK(error_of("server:\n  kv_type: q8\n").find("server.kv_type must be one of") !=
          std::string::npos);
    CHECK(error_of("server:\n  host: [a]\n").find("server.host must be a non-empty string") !=
          std::string::npos);
    CHECK(error_of("server:\n  max_body_bytes: 10\n").find("between 1KiB and 1GiB") !=
          std::string::npos);
}
