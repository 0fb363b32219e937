#include "ferrox/tokenizer/utf8_streamer.h"

#include <cstdint>

namespace ferrox {
namespace {

// Bytes a lead byte promises in total; 0 for a byte that cannot lead.
size_t promised_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead < 0xC2) return 0;  // continuation byte, or an overlong-only lead
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    if (lead < 0xF5) return 4;
    return 0;
}

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

std::string Utf8Streamer::feed(std::string_view bytes) {
    pending_ += bytes;
    std::string ready;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const size_t length = promised_length(static_cast<uint8_t>(pending_[pos]));
        if (length == 0) {  // can never become a character: let it through
            ready.push_back(pending_[pos++]);
            continue;
        }
        size_t have = 1;
        while (have < length && pos + have < pending_.size() &&
               is_continuation(static_cast<uint8_t>(pending_[pos + have])))
            ++have;
        if (have == length) {
            ready.append(pending_, pos, length);
            pos += length;
        } else if (pos + have == pending_.size()) {
            break;  // unfinished: wait for more bytes
        } else {    // broken by a non-continuation byte: pass what we have through
            ready.append(pending_, pos, have);
            pos += have;
        }
    }
    pending_.erase(0, pos);
    return ready;
}

std::string Utf8Streamer::flush() {
    std::string rest;
    rest.swap(pending_);
    return rest;
}

}  // namespace ferrox
