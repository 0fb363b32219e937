// libFuzzer target: arbitrary bytes as a chat template. Parse; when it parses,
// render it against a small conversation under tight budgets. Any failure must
// be a TemplateError/ValueError -- a crash, a hang or an ASan report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "template/evaluator.h"
#include "template/parser.h"

namespace {

ferrox::tmpl::Dict make_context() {
    using namespace ferrox::tmpl;
    Dict ctx;
    List messages;
    for (const char* role : {"system", "user", "assistant"}) {
        Value m = make_dict();
        m.as_dict().set(Value("role"), Value(role));
        m.as_dict().set(Value("content"), Value(std::string("hi ") + role));
        messages.push_back(m);
    }
    // Marked as client text, as the chat renderer marks it, so that the
    // provenance paths (concatenation, joins, trims, builtins) run too.
    ctx.set(Value("messages"), Value(std::move(messages)).as_client());
    ctx.set(Value("add_generation_prompt"), Value(true));
    ctx.set(Value("bos_token"), Value("<s>"));
    ctx.set(Value("tools"), Value::none());
    return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    static const ferrox::tmpl::Dict context = make_context();
    try {
        const ferrox::tmpl::Program program = ferrox::tmpl::parse(source);
        ferrox::tmpl::RenderLimits limits;
        limits.max_steps = 20000;
        limits.max_call_depth = 20;
        limits.max_output = 1 << 16;
        limits.max_memory = 32u << 20;
        const auto out = ferrox::tmpl::render_marked(program, context, limits);
        // The engine's client ranges lie inside the text, in order.
        size_t at = 0;
        for (const auto& r : out.client) {
            if (r.begin < at || r.end < r.begin || r.end > out.text.size()) __builtin_trap();
            at = r.end;
        }
    } catch (const ferrox::tmpl::TemplateError&) {
    } catch (const ferrox::tmpl::ValueError&) {
    }
    return 0;
}
