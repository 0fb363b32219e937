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
    ctx.set(Value("messages"), Value(std::move(messages)));
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
        (void)ferrox::tmpl::render(program, context, limits);
    } catch (const ferrox::tmpl::TemplateError&) {
    } catch (const ferrox::tmpl::ValueError&) {
    }
    return 0;
}
