#include "usage_errors.h"

#include <fmt/format.h>

#include <string_view>

#include "ferrox/escape.h"
#include "ferrox/log.h"

namespace ferrox::cli {

CLI::Validator non_empty_folder_name(const std::string& flag) {
    return CLI::Validator(
        [flag](std::string& value) -> std::string {
            if (!value.empty()) return {};
            return flag +
                   ": an empty folder name would mean the current directory, which is "
                   "never searched; name a folder";
        },
        "DIR");
}

bool report_unknown_subcommand(const CLI::App& app, int argc, char** argv) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") return false;
        if (arg.starts_with("-")) {
            // A global option that takes a value consumes the next word.
            const CLI::Option* option = nullptr;
            try {
                option = arg.find('=') == std::string_view::npos
                             ? app.get_option_no_throw(std::string(arg))
                             : nullptr;
            } catch (const std::exception&) {
            }
            if (option && option->get_type_size() != 0 && i + 1 < argc) ++i;
            continue;
        }
        for (const auto& name : names)
            if (name == arg) return false;  // a real subcommand: CLI11's own message fits
        logger().error("unknown subcommand '{}'; the subcommands are: {} (ferrox --help)",
                       escape_text(arg), fmt::join(names, ", "));
        return true;
    }
    return false;
}

}  // namespace ferrox::cli
