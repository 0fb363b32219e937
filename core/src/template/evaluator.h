// Runs a parsed template against its variables and returns the text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "template/ast.h"

namespace ferrox::tmpl {

struct RenderLimits {
    uint64_t max_steps = 5'000'000;  // statements + expressions + loop iterations + builtin work
    int max_call_depth = 100;        // nested macro calls
    size_t max_output = kDefaultMaxOutput;      // bytes of output, and of any one string
    uint64_t max_memory = uint64_t{512} << 20;  // bytes of strings and list slots built, in total
    int max_eval_depth = 400;  // statements and expressions being evaluated inside each other
};

// Rendered text and where in it client text was written.
struct MarkedText {
    std::string text;
    ClientSpans client;
};

// `variables` sit on top of the globals (range, namespace, raise_exception...).
// Throws TemplateError naming the line, construct and the budget exceeded.
MarkedText render_marked(const Program& program, const Dict& variables, const RenderLimits& limits);
std::string render(const Program& program, const Dict& variables, const RenderLimits& limits);

}  // namespace ferrox::tmpl
