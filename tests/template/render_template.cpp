// Test driver for the Jinja conformance test: renders templates with ferrox's
// engine so a Python test can compare the bytes with jinja2's.
//   ferrox_render_template TEMPLATE.jinja CONTEXT.json   -> the text on stdout
//   ferrox_render_template --batch JOBS.json             -> a JSON array on stdout
//   ferrox_render_template --chat JOBS.json              -> a JSON array on stdout
// JOBS.json: [{"template": PATH, "context": {...}}, ...]; each result is
// {"ok": true, "text": ...} or {"ok": false, "error": ...}. Exit 1 on a failed
// single render (the error on stderr), 2 on bad usage or unreadable input.
// --chat jobs: {"template", "messages", "tools", "kwargs", "add_generation_prompt",
// "controls": [control-token texts], "plain": TEXT?}: renders through the
// core's ChatRenderer over a byte-level vocabulary holding those control
// tokens (plus <s>, </s> as BOS / EOS), and answers {"ok", "text", "controls":
// the control tokens in the prompt's ids, in order, "plain_controls": those of
// `plain` tokenized with special-token parsing}; a job without "template"
// only tokenizes `plain`.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferrox/template/chat_renderer.h"
#include "ferrox/template/chat_template.h"
#include "ferrox/tokenizer/tokenizer.h"

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

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the
// rest move to U+0100 and up, in byte order.
std::string byte_token(int byte) {
    auto printable = [](int b) {
        return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int code = byte;
    if (!printable(byte)) {
        int n = 0;
        for (int b = 0; b < byte; ++b) n += printable(b) ? 0 : 1;
        code = 256 + n;
    }
    std::string s;
    if (code < 0x80) {
        s += static_cast<char>(code);
    } else {
        s += static_cast<char>(0xC0 | (code >> 6));
        s += static_cast<char>(0x80 | (code & 0x3F));
    }
    return s;
}

std::unique_ptr<ferrox::Tokenizer> byte_tokenizer(const nlohmann::ordered_json& controls) {
    ferrox::VocabSpec spec;
    spec.model = "gpt2";
    spec.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_token(b));
    spec.types.assign(spec.tokens.size(), ferrox::TokenType::normal);
    auto add_control = [&](const std::string& text) {
        for (const auto& t : spec.tokens)
            if (t == text) return;
        spec.tokens.push_back(text);
        spec.types.push_back(ferrox::TokenType::control);
    };
    add_control("<s>");
    add_control("</s>");
    spec.bos = 256;
    spec.eos = 257;
    spec.add_bos = false;
    for (const auto& c : controls) add_control(c.get<std::string>());
    auto tok = ferrox::Tokenizer::from_spec(std::move(spec));
    if (!tok) throw std::runtime_error(tok.error().message());
    return std::move(*tok);
}

nlohmann::ordered_json control_texts(const ferrox::Tokenizer& tok, const std::vector<int32_t>& ids,
                                     const nlohmann::ordered_json& controls) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (int32_t id : ids) {
        if (id == 256 || id == 257) {
            out.push_back(id == 256 ? "<s>" : "</s>");
            continue;
        }
        for (const auto& c : controls)
            if (tok.find_token(c.get<std::string>()) == id) out.push_back(c);
    }
    return out;
}

nlohmann::ordered_json chat_one(const nlohmann::ordered_json& job) {
    if (!job.contains("template")) {  // tokenizing `plain` alone
        const auto tok = byte_tokenizer(job.at("controls"));
        return {{"ok", true},
                {"plain_controls",
                 control_texts(*tok, tok->encode(job.at("plain").get<std::string>(), false, true),
                               job.at("controls"))}};
    }
    std::string source;
    const std::string path = job.at("template");
    if (!read_file(path, source)) return {{"ok", false}, {"error", "cannot read " + path}};
    auto t = ferrox::ChatTemplate::parse(std::move(source), path);
    if (!t) return {{"ok", false}, {"error", t.error().message()}};
    const auto& controls = job.at("controls");
    const auto tok = byte_tokenizer(controls);
    ferrox::ChatModelFacts facts;
    facts.path = path;
    facts.bos = tok->bos();
    facts.bos_text = "<s>";
    facts.eos_text = "</s>";
    facts.encode = [&tok](std::string_view text, bool add_special, bool parse_special) {
        return tok->encode(text, add_special, parse_special);
    };
    facts.encode_segments = [&tok](std::span<const ferrox::TextSegment> segments,
                                   bool add_special) { return tok->encode(segments, add_special); };
    const ferrox::ChatRenderer renderer(std::move(*t), std::move(facts));
    auto p = renderer.render(job.at("messages"), job.value("add_generation_prompt", true),
                             job.contains("tools") ? job["tools"] : nlohmann::ordered_json(),
                             job.contains("kwargs") ? job["kwargs"] : nlohmann::ordered_json());
    if (!p) return {{"ok", false}, {"error", p.error().message()}};
    nlohmann::ordered_json r = {
        {"ok", true}, {"text", p->text}, {"controls", control_texts(*tok, p->tokens, controls)}};
    if (job.contains("plain"))
        r["plain_controls"] = control_texts(
            *tok, tok->encode(job["plain"].get<std::string>(), false, true), controls);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: ferrox_render_template TEMPLATE CONTEXT.json | --batch JOBS.json | "
                     "--chat JOBS.json\n";
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
    if (first == "--batch" || first == "--chat") {
        nlohmann::ordered_json results = nlohmann::ordered_json::array();
        for (const auto& job : input)
            results.push_back(first == "--chat"
                                  ? chat_one(job)
                                  : render_one(job.at("template"), job.at("context")));
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
