// Test driver for the Jinja conformance test: renders templates with ferrox's
// engine so a Python test can compare the bytes with jinja2's.
//   ferrox_render_template TEMPLATE.jinja CONTEXT.json   -> the text on stdout
//   ferrox_render_template --batch JOBS.json             -> a JSON array on stdout
// JOBS.json: [{"template": PATH, "context": {...}}, ...]; each result is
// {"ok": true, "text": ...} or {"ok": false, "error": ...}. Exit 1 on a failed
// single render (the error on stderr), 2 on bad usage or unreadable input.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferrox/template/chat_template.h"

namespace {

bool read_file(const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream s;
    s << in.rdbuf();
    out = s.str();
    return true;
}

nlohmann::ordered_json render_one(const std::string& template_path,
                                  const nlohmann::ordered_json& context) {
    std::string source;
    if (!read_file(template_path, source))
        return {{"ok", false}, {"error", "cannot read " + template_path}};
    auto t = ferrox::ChatTemplate::parse(std::move(source), template_path);
    if (!t) return {{"ok", false}, {"error", t.error().message()}};
    auto text = t->render(context);
    if (!text) return {{"ok", false}, {"error", text.error().message()}};
    return {{"ok", true}, {"text", *text}};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: ferrox_render_template TEMPLATE CONTEXT.json | --batch JOBS.json\n";
        return 2;
    }
    const std::string first = argv[1];
    std::string json_text;
    if (!read_file(argv[2], json_text)) {
        std::cerr << "cannot read " << argv[2] << "\n";
        return 2;
    }
    nlohmann::ordered_json input;
    try {
        input = nlohmann::ordered_json::parse(json_text);
    } catch (const std::exception& e) {
        std::cerr << argv[2] << ": " << e.what() << "\n";
        return 2;
    }
    if (first == "--batch") {
        nlohmann::ordered_json results = nlohmann::ordered_json::array();
        for (const auto& job : input)
            results.push_back(render_one(job.at("template"), job.at("context")));
        std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                  << "\n";
        return 0;
    }
    const auto r = render_one(first, input);
    if (!r["ok"].get<bool>()) {
        std::cerr << r["error"].get<std::string>() << "\n";
        return 1;
    }
    std::cout << r["text"].get<std::string>();
    return 0;
}
