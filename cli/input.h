// Input files a user names on the command line (a prompt file): read only
// when they are regular files of bounded size, with the reason otherwise.
#pragma once

#include <cstdint>
#include <string>

#include "ferrox/expected.h"

namespace ferrox::cli {

// 16 MiB of text is ~4 million tokens, far past any context ferrox offers.
inline constexpr uint64_t kMaxPromptFileBytes = uint64_t{16} << 20;

// The whole file, byte for byte. Refuses folders, FIFOs, devices and sockets
// (a FIFO is opened without blocking), empty files and files over `limit`
// bytes; `flag` ("--file") starts every message.
Expected<std::string> read_text_file(const std::string& path, std::string_view flag,
                                     uint64_t limit = kMaxPromptFileBytes);

}  // namespace ferrox::cli
