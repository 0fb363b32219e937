// Runs a parsed template against its variables and returns the text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "template/ast.h"

namespace ferrox::tmpl {

struct RenderLimits {
    uint64_t max_steps = 5'000'000;         // statements + expressions + loop iterations
    int max_call_depth = 100;               // nested macro calls
    size_t max_output = kDefaultMaxOutput;  // bytes of text any one string may reach
};

// `variables` sit on top of the globals (range, namespace, raise_exception...).
// Throws TemplateError naming the line and construct.
std::string render(const Program& program, const Dict& variables, const RenderLimits& limits);

}  // namespace ferrox::tmpl
