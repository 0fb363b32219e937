// Everything the CLI writes on stdout goes through here or is checked here:
// text from files is escaped (ferrox/escape.h), JSON documents are made
// encodable whatever bytes a file held, and a failed write (a full disk, a
// closed pipe) becomes a message and a non-zero exit instead of lost output.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "ferrox/escape.h"
#include "ferrox/expected.h"

namespace ferrox::cli {

// One line's worth of text from a file or the command line, safe for a terminal.
inline std::string shown(std::string_view text) { return escape_text(text, EscapeFor::Line); }

// Every string and key of `doc`, made valid UTF-8 (escape_text's Json form).
void make_encodable(nlohmann::json& doc);

// make_encodable, then the document and a newline on stdout.
void print_json(nlohmann::json doc);

// Called once, as the last thing main() does: flushes stdout and, when any
// write to it failed, says so (with the errno text) and turns `code` into a
// failure. SIGPIPE is ignored from startup (ignore_sigpipe) so a closed pipe
// is an EPIPE reported here, not a silent death.
int finish_stdout(int code);
void ignore_sigpipe();
// True while stdout has taken every byte so far (flushes first).
bool stdout_ok();

// Writes a file so that it either appears whole or not at all: the bytes go
// to a temporary file beside `path`, which is renamed over it after a flush,
// fsync and close that all succeeded. Refuses to replace `protect` (the model
// file a command reads). `write` is called with a sink that returns false on
// a write error.
using ByteSink = std::function<bool(std::span<const std::byte>)>;
Expected<void> write_file_atomically(const std::filesystem::path& path,
                                     const std::filesystem::path& protect,
                                     const std::function<Expected<void>(const ByteSink&)>& write);

}  // namespace ferrox::cli
