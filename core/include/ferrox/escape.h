// Text from files (GGUF keys, strings, tensor names, token pieces) and from
// the command line (paths) on its way to a terminal or a JSON document: the
// one function every output goes through, so that no byte of a file can move
// a terminal's cursor, retitle its window or make a JSON encoder throw.
#pragma once

#include <string>
#include <string_view>

#include "ferrox/api.h"

namespace ferrox {

enum class EscapeFor {
    // One line of a table or message: every control character becomes \n,
    // \t, \r, \e, \xNN (C0) or \uNNNN (DEL, C1), a backslash \\, and each
    // byte of invalid UTF-8 \xNN. Valid printable UTF-8 is kept as is.
    Line,
    // Running text (generated output, multi-line logs): as Line, but newline
    // and tab are kept and backslashes are not doubled.
    Text,
    // A JSON string value or key: the encoder escapes control characters
    // itself; only invalid UTF-8 (which it cannot encode) becomes \xNN.
    Json,
};

FERROX_API std::string escape_text(std::string_view bytes, EscapeFor where = EscapeFor::Line);

}  // namespace ferrox
