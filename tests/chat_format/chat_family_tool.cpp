// Test driver: the family detect_family() gives each template file.
//   ferrox_chat_family FILE.jinja...  -> {"FILE's name": {"family", "supports_tools"}, ...}
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferrox/chat_format/family.h"

int main(int argc, char** argv) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (int i = 1; i < argc; ++i) {
        std::ifstream in(argv[i], std::ios::binary);
        if (!in) {
            std::cerr << "cannot read " << argv[i] << "\n";
            return 2;
        }
        std::ostringstream text;
        text << in.rdbuf();
        const auto d = ferrox::detect_family(text.str());
        out[std::filesystem::path(argv[i]).filename().string()] = {
            {"family", std::string(ferrox::family_info(d.family).name)},
            {"supports_tools", d.supports_tools}};
    }
    std::cout << out.dump(1) << "\n";
    return 0;
}
