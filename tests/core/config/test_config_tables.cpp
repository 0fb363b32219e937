// The settings tables are the one declaration of each core setting: the docs
// show them, the shipped file spells out their defaults, the parser reads
// through them.
#include <fmt/format.h>

#include <string>

#include "config_test_support.h"
#include "ferrox/config.h"
#include "ferrox/config_settings.h"

namespace {

// The lines of `section:` in a YAML text, up to the next top-level key.
std::string section_text(const std::string& text, std::string_view section) {
    const std::string head = "\n" + std::string(section) + ":\n";
    const size_t start = text.find(head);
    if (start == std::string::npos) return {};
    size_t end = start + head.size();
    while (end < text.size()) {
        const size_t next = text.find('\n', end);
        const size_t stop = next == std::string::npos ? text.size() : next;
        if (stop > end && text[end] != ' ' && text[end] != '#') break;
        end = stop + 1;
    }
    return text.substr(start, std::min(end, text.size()) - start);
}

}  // namespace

TEST_CASE("docs/config.md's section tables are the ones the settings table renders") {
    const std::string docs = ferrox::test::read_file(FERROX_CONFIG_DOCS);
    for (const std::string_view section :
         {std::string_view("plugins"), std::string_view("backends"), ferrox::kBackendSection,
          std::string_view("registry"), std::string_view("log")}) {
        const std::string table = ferrox::config_section_markdown(section);
        INFO("docs/config.md must hold, for section " << section << ", exactly:\n" << table);
        CHECK(table.find("| `") != std::string::npos);
        CHECK(docs.find(table) != std::string::npos);
    }
}

TEST_CASE("every table setting has help and a type, and a file may set it") {
    for (const ferrox::ConfigSetting& s : ferrox::config_settings()) {
        INFO(s.section << "." << s.key);
        CHECK(ferrox::find_config_setting(s.section, s.key) == &s);
        CHECK(!s.help.empty());
        CHECK(!ferrox::config_setting_type(s).empty());
    }
    CHECK(ferrox::config_section_keys("plugins") ==
          std::vector<std::string>{"paths", "allow_without_note", "create_timeout"});
    CHECK(ferrox::config_top_level_keys() == std::vector<std::string>{"plugins", "backends", "cpu",
                                                                      "cuda", "registry", "log",
                                                                      "server"});
}

TEST_CASE("the shipped file spells out every table default, and the built-in default is it") {
    const std::string text = ferrox::test::read_file(FERROX_SHIPPED_CONFIG);
    const auto shipped = ferrox::load_config_file(FERROX_SHIPPED_CONFIG);
    REQUIRE(shipped.has_value());
    const ferrox::Config built_in = ferrox::default_config();
    const ferrox::Config declared{};
    for (const ferrox::ConfigSetting& s : ferrox::config_settings()) {
        INFO(s.section << "." << s.key);
        if (s.section == ferrox::kBackendSection) {
            // `required` in each shipped backend's section, as required_by_default says.
            for (const std::string_view backend : ferrox::shipped_backends()) {
                const std::string line =
                    fmt::format("\n  {}: {}\n", s.key, ferrox::required_by_default(backend));
                INFO("section " << backend << " must hold" << line);
                CHECK(section_text(text, backend).find(line) != std::string::npos);
            }
            continue;
        }
        const std::string value = ferrox::config_setting_value(declared, s);
        CHECK(ferrox::config_setting_value(*shipped, s) == value);
        CHECK(ferrox::config_setting_value(built_in, s) == value);
        const std::string line = fmt::format("\n  {}: {}\n", s.key, value);
        INFO("section " << s.section << " must hold" << line);
        CHECK(section_text(text, s.section).find(line) != std::string::npos);
    }
}
