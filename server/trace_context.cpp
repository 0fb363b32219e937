#include "trace_context.h"

#include <algorithm>
#include <random>

namespace ferrox::server {
namespace {

int lower_hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // uppercase too: the format is HEXDIGLC
}

// `text` (2 * N lowercase hex digits) into `out`; false when it is not.
template <size_t N>
bool read_hex(std::string_view text, std::array<uint8_t, N>& out) {
    if (text.size() != 2 * N) return false;
    for (size_t i = 0; i < N; ++i) {
        const int hi = lower_hex_digit(text[2 * i]), lo = lower_hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
    return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& id) {
    return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

template <size_t N>
std::array<uint8_t, N> random_id() {
    thread_local std::mt19937_64 generator((uint64_t(std::random_device{}()) << 32) ^
                                           std::random_device{}());
    std::array<uint8_t, N> id{};
    do {
        for (size_t i = 0; i < N; i += 8) {
            const uint64_t word = generator();
            for (size_t b = 0; b < 8 && i + b < N; ++b) id[i + b] = uint8_t(word >> (8 * b));
        }
    } while (all_zero(id));
    return id;
}

}  // namespace

std::optional<SpanContext> parse_traceparent(std::string_view value) {
    // version "-" trace-id "-" parent-id "-" trace-flags: 2+1+32+1+16+1+2
    constexpr size_t kLength = 55;
    if (value.size() < kLength) return std::nullopt;
    std::array<uint8_t, 1> version{}, flags{};
    if (!read_hex(value.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
    if (version[0] == 0 ? value.size() != kLength : value.size() > kLength && value[kLength] != '-')
        return std::nullopt;
    if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
    SpanContext parent;
    if (!read_hex(value.substr(3, 32), parent.trace_id) ||
        !read_hex(value.substr(36, 16), parent.span_id) || !read_hex(value.substr(53, 2), flags))
        return std::nullopt;
    if (all_zero(parent.trace_id) || all_zero(parent.span_id)) return std::nullopt;
    parent.sampled = (flags[0] & 1) != 0;
    return parent;
}

std::string format_traceparent(const SpanContext& c) {
    return "00-" + hex_id(c.trace_id) + "-" + hex_id(c.span_id) + (c.sampled ? "-01" : "-00");
}

std::string hex_id(const uint8_t* bytes, size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(2 * size, '0');
    for (size_t i = 0; i < size; ++i) {
        out[2 * i] = kDigits[bytes[i] >> 4];
        out[2 * i + 1] = kDigits[bytes[i] & 15];
    }
    return out;
}

TraceId new_trace_id() { return random_id<16>(); }
SpanId new_span_id() { return random_id<8>(); }

}  // namespace ferrox::server
