// ferrox.h 0.2 on a real model: what `ferrox run` reads through it. The
// model's facts, its capacity line and residency, the kernel report (typed
// counts and JSON agreeing), a token's vocabulary text, a context's per-op
// profile and its reset, a detok stream that loses nothing to a small
// buffer and (0.3) one with stop strings -- each with its bad input (NULL, a wrong struct_size)
// refused with a message.
//
//   c_api_reports MODEL.gguf   (tiny-llama; exit 77 when the file is absent: skipped)
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "c_api_status.h"
#include "ferrox/ferrox.h"

namespace {

using ferrox::test::fresh_status;

int failures = 0;

void expect(bool ok, const char* what, const ferrox_call_status& st) {
    if (ok) return;
    std::fprintf(stderr, "FAIL: %s (status: %s)\n", what, st.message);
    ++failures;
}

bool mentions(const ferrox_call_status& st, const char* text) {
    return std::strstr(st.message, text) != nullptr;
}

ferrox_batch one_sequence(const std::vector<int32_t>& tokens, std::vector<int32_t>& positions,
                          std::vector<int32_t>& seqs, int32_t first_pos) {
    positions.resize(tokens.size());
    seqs.assign(tokens.size(), 0);
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = first_pos + static_cast<int32_t>(i);
    ferrox_batch b;
    std::memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.n_tokens = static_cast<uint32_t>(tokens.size());
    b.tokens = tokens.data();
    b.positions = positions.data();
    b.seq_ids = seqs.data();
    return b;
}

void facts_and_capacity(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    expect(ferrox_api_version() == (FERROX_API_VERSION_MAJOR << 16 | FERROX_API_VERSION_MINOR),
           "the API version is the header's", st);
    expect(std::string(ferrox_model_arch(model)) == "llama", "the architecture is llama", st);
    expect(ferrox_model_n_layer(model) == 2 && ferrox_model_n_embd(model) == 128,
           "2 layers of 128 embd (tiny-llama)", st);
    // n_ctx_max 0: min(4096, training) = 256; n_batch_max 0: 256.
    expect(ferrox_model_n_ctx(model) == 256 && ferrox_model_n_batch(model) == 256,
           "the model's default context and batch", st);
    expect(std::string(ferrox_model_arch(nullptr)).empty() && ferrox_model_n_layer(nullptr) == 0 &&
               ferrox_model_n_ctx(nullptr) == 0,
           "a NULL model's facts are empty", st);

    const char* line = nullptr;
    expect(ferrox_model_capacity_summary(model, &line, &st) == FERROX_CODE_OK && line &&
               std::strncmp(line, "weights ", 8) == 0 && std::strstr(line, " available"),
           "the capacity line reads \"weights ... available\"", st);
    expect(ferrox_model_capacity_summary(model, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "NULL"),
           "capacity with out NULL is refused", st);
}

void residency(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    ferrox_residency r;
    std::memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    expect(ferrox_model_residency(model, &r, &st) == FERROX_CODE_OK, "residency", st);
    expect(r.resident == 0 && r.backend && r.backend[0] == '\0' && r.reason &&
               std::strlen(r.reason) > 0,
           "on the CPU plugin: host memory, with the reason", st);
    // A caller that knows only struct_size and resident: nothing past them is written.
    struct Old {
        ferrox_residency head;
        char guard[8];
    } old;
    std::memset(&old, 'x', sizeof old);
    old.head.struct_size = offsetof(ferrox_residency, backend);
    expect(
        ferrox_model_residency(model, &old.head, &st) == FERROX_CODE_OK && old.head.resident == 0,
        "a shorter residency struct is filled", st);
    const char* after =
        reinterpret_cast<const char*>(&old.head) + offsetof(ferrox_residency, backend);
    bool untouched = true;
    for (size_t i = 0; i < sizeof old - offsetof(ferrox_residency, backend); ++i)
        untouched = untouched && after[i] == 'x';
    expect(untouched, "nothing past a shorter residency struct is written", st);
    r.struct_size = 0;
    expect(ferrox_model_residency(model, &r, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "struct_size"),
           "a residency struct_size of 0 is refused", st);
    r.struct_size = sizeof r + 8;
    expect(ferrox_model_residency(model, &r, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "struct_size"),
           "a residency struct_size larger than the library knows is refused", st);
    expect(ferrox_model_residency(nullptr, &r, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "residency of a NULL model is refused", st);
}

void kernel_report(const ferrox_model* model, uint64_t calls_before) {
    ferrox_call_status st = fresh_status();
    uint64_t calls = 0, fallback = 0;
    expect(ferrox_model_kernel_calls(model, &calls, &fallback, &st) == FERROX_CODE_OK,
           "kernel calls", st);
    expect(calls > calls_before && fallback <= calls, "a decode adds kernel calls", st);
    size_t needed = 0;
    char small[4];
    expect(ferrox_model_kernel_report(model, small, sizeof small, &needed, &st) ==
                   FERROX_CODE_BUFFER_TOO_SMALL &&
               needed > sizeof small,
           "the report into a small buffer says what it needs", st);
    std::string text(needed + 1, '\0');
    expect(
        ferrox_model_kernel_report(model, text.data(), text.size(), &needed, &st) == FERROX_CODE_OK,
        "the report", st);
    text.resize(needed);
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    expect(!doc.is_discarded() && doc.is_object(), "the report is a JSON object", st);
    if (doc.is_discarded()) return;
    uint64_t summed = 0;
    bool fields = doc.contains("kernels") && doc["kernels"].is_array() && !doc["kernels"].empty();
    for (const auto& k : doc.value("kernels", nlohmann::json::array())) {
        for (const char* key : {"backend", "op", "role", "kind", "outcome", "detail"})
            fields = fields && k.contains(key) && k[key].is_string();
        fields = fields && k.contains("calls") && k["calls"].is_number_unsigned();
        summed += k.value("calls", uint64_t{0});
    }
    expect(fields, "every record has backend, op, role, kind, outcome, detail and calls", st);
    expect(doc.value("calls", uint64_t{0}) == calls && summed == calls &&
               doc.value("fallback_calls", uint64_t{1} << 62) == fallback,
           "the JSON's counts are the typed counts and its records' sum", st);
    expect(ferrox_model_kernel_report(nullptr, text.data(), text.size(), &needed, &st) ==
               FERROX_CODE_INVALID_ARGUMENT,
           "the report of a NULL model is refused", st);
    expect(
        ferrox_model_kernel_calls(nullptr, &calls, &fallback, &st) == FERROX_CODE_INVALID_ARGUMENT,
        "the counts of a NULL model are refused", st);
}

void token_text(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    const int32_t bos = ferrox_model_bos(model);
    char buf[64];
    size_t needed = 0;
    expect(bos >= 0 &&
               ferrox_token_text(model, bos, buf, sizeof buf, &needed, &st) == FERROX_CODE_OK &&
               std::string(buf) == "<s>" && needed == 3,
           "BOS's vocabulary text is <s>", st);
    // ferrox_detokenize leaves a control token out; its text is still there.
    expect(ferrox_detokenize(model, &bos, 1, buf, sizeof buf, &needed, &st) == FERROX_CODE_OK &&
               needed == 0,
           "detokenize gives nothing for BOS", st);
    const auto vocab = static_cast<int32_t>(ferrox_model_vocab(model));
    expect(ferrox_token_text(model, vocab, buf, sizeof buf, &needed, &st) ==
                   FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "outside"),
           "a token past the vocabulary is refused", st);
    expect(
        ferrox_token_text(model, -1, buf, sizeof buf, &needed, &st) == FERROX_CODE_INVALID_ARGUMENT,
        "a negative token is refused", st);
    expect(ferrox_token_text(nullptr, 0, buf, sizeof buf, &needed, &st) ==
               FERROX_CODE_INVALID_ARGUMENT,
           "a NULL model is refused", st);
}

// Rows of a profile document, and whether it reads as docs/api.md says.
struct ProfileDoc {
    bool valid = false, launch_times = true;
    uint64_t nanoseconds = 0, summed = 0, weight_rows = 0;
    size_t rows = 0;
};

ProfileDoc read_profile(ferrox_context* ctx, ferrox_call_status& st) {
    ProfileDoc p;
    const char* json = nullptr;
    if (ferrox_context_profile(ctx, &json, &st) != FERROX_CODE_OK || !json) return p;
    const auto doc = nlohmann::json::parse(json, nullptr, false);
    if (doc.is_discarded() || !doc.contains("ops") || !doc["ops"].is_array()) return p;
    p.valid = true;
    p.launch_times = doc.value("launch_times", true);
    p.nanoseconds = doc.value("nanoseconds", uint64_t{0});
    uint64_t previous = UINT64_MAX;
    for (const auto& op : doc["ops"]) {
        const uint64_t ns = op.value("nanoseconds", uint64_t{0});
        p.valid = p.valid && op.value("calls", uint64_t{0}) > 0 && ns <= previous &&
                  op.contains("op") && op.contains("role") && op.contains("kind") &&
                  op.contains("bytes");
        previous = ns;
        p.summed += ns;
        const std::string name = op.value("op", "");
        if ((name == "matvec" || name == "gemm") && op.value("bytes", uint64_t{0}) > 0)
            ++p.weight_rows;
        ++p.rows;
    }
    return p;
}

void profile(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    std::vector<int32_t> prompt{1, 450, 4996, 17354, 1701}, positions, seqs;
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    expect(cp.profile == 0, "profiling is off by default", st);
    ferrox_context* plain = nullptr;
    expect(ferrox_context_new(model, &cp, &plain, &st) == FERROX_CODE_OK, "a plain context", st);
    const char* json = nullptr;
    expect(ferrox_context_profile(plain, &json, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "without profile"),
           "the profile of a context made without it is refused", st);
    expect(ferrox_context_profile_reset(plain, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "resetting it is refused too", st);
    ferrox_context_free(plain);
    // A caller built against 0.1's shorter struct gets no profiling.
    cp.profile = 1;
    cp.struct_size = offsetof(ferrox_context_params, profile);
    expect(ferrox_context_new(model, &cp, &plain, &st) == FERROX_CODE_OK, "a 0.1 context", st);
    expect(ferrox_context_profile(plain, &json, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "0.1's struct_size leaves profiling off", st);
    ferrox_context_free(plain);

    cp.struct_size = sizeof cp;
    ferrox_context* ctx = nullptr;
    expect(ferrox_context_new(model, &cp, &ctx, &st) == FERROX_CODE_OK, "a profiled context", st);
    if (!ctx) return;
    ProfileDoc p = read_profile(ctx, st);
    expect(p.valid && p.rows == 0 && p.nanoseconds == 0, "nothing timed before a decode", st);
    ferrox_batch b = one_sequence(prompt, positions, seqs, 0);
    expect(ferrox_decode(ctx, &b, &st) == FERROX_CODE_OK, "the prompt decodes", st);
    p = read_profile(ctx, st);
    expect(p.valid && p.rows > 0 && !p.launch_times, "the prompt's ops, host times", st);
    expect(p.nanoseconds == p.summed && p.weight_rows > 0,
           "the total is the rows' sum; weight products count their bytes", st);
    expect(ferrox_context_profile_reset(ctx, &st) == FERROX_CODE_OK, "reset", st);
    p = read_profile(ctx, st);
    expect(p.valid && p.rows == 0 && p.nanoseconds == 0, "a reset empties the profile", st);
    std::vector<int32_t> one{2};
    b = one_sequence(one, positions, seqs, static_cast<int32_t>(prompt.size()));
    expect(ferrox_decode(ctx, &b, &st) == FERROX_CODE_OK, "one more token decodes", st);
    p = read_profile(ctx, st);
    expect(p.valid && p.rows > 0, "and is timed from the reset on", st);
    expect(ferrox_context_profile(ctx, nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "json NULL is refused", st);
    expect(ferrox_context_profile(nullptr, &json, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               ferrox_context_profile_reset(nullptr, &st) == FERROX_CODE_INVALID_ARGUMENT,
           "a NULL context is refused", st);
    ferrox_context_free(ctx);
}

// The id of the byte-fallback token "<0xNN>" (SentencePiece vocabularies
// hold one per byte near the start), or -1.
int32_t byte_token(const ferrox_model* model, unsigned byte) {
    char want[8], text[16];
    std::snprintf(want, sizeof want, "<0x%02X>", byte);
    size_t needed = 0;
    ferrox_call_status st = fresh_status();
    for (int32_t id = 0; id < 300; ++id)
        if (ferrox_token_text(model, id, text, sizeof text, &needed, &st) == FERROX_CODE_OK &&
            std::strcmp(text, want) == 0)
            return id;
    return -1;
}

void detok_small_buffer(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    // The euro sign (E2 82 AC) as three byte tokens: the first two are held back (half a
    // character); the third completes it, but into 2 bytes it does not fit.
    // That push must change nothing: the same push with room gets the whole
    // character, not a lone continuation byte.
    const int32_t e2 = byte_token(model, 0xE2), x82 = byte_token(model, 0x82),
                  xac = byte_token(model, 0xAC);
    expect(e2 >= 0 && x82 >= 0 && xac >= 0, "byte tokens <0xE2> <0x82> <0xAC>", st);
    if (e2 < 0 || x82 < 0 || xac < 0) return;
    ferrox_detok_stream* stream = nullptr;
    expect(ferrox_detok_stream_new(model, &stream, &st) == FERROX_CODE_OK, "a stream", st);
    char small[2], room[64];
    size_t needed = 99;
    expect(
        ferrox_detok_stream_push(stream, e2, room, sizeof room, &needed, &st) == FERROX_CODE_OK &&
            needed == 0 &&
            ferrox_detok_stream_push(stream, x82, room, sizeof room, &needed, &st) ==
                FERROX_CODE_OK &&
            needed == 0,
        "half a character is held back", st);
    expect(ferrox_detok_stream_push(stream, xac, small, sizeof small, &needed, &st) ==
                   FERROX_CODE_BUFFER_TOO_SMALL &&
               needed == 3,
           "a push into 2 bytes says it needs 3", st);
    expect(
        ferrox_detok_stream_push(stream, xac, room, sizeof room, &needed, &st) == FERROX_CODE_OK &&
            std::string(room, needed) == "\xe2\x82\xac",
        "the same push with room gets the whole character", st);
    expect(
        ferrox_detok_stream_push(stream, -1, room, sizeof room, &needed, &st) == FERROX_CODE_OK &&
            needed == 0,
        "and nothing is left over at the end", st);
    expect(ferrox_detok_stream_push(nullptr, xac, room, sizeof room, &needed, &st) ==
               FERROX_CODE_INVALID_ARGUMENT,
           "a NULL stream is refused", st);
    ferrox_detok_stream_free(stream);
}

// Pushes one byte token per character of `text`; what the stream wrote.
std::string push_bytes(const ferrox_model* model, ferrox_detok_stream* stream,
                       const std::string& text, ferrox_call_status& st) {
    std::string out;
    char room[64];
    size_t needed = 0;
    for (const char c : text) {
        const int32_t id = byte_token(model, static_cast<uint8_t>(c));
        expect(id >= 0, "a byte token per character", st);
        if (id >= 0 &&
            ferrox_detok_stream_push(stream, id, room, sizeof room, &needed, &st) == FERROX_CODE_OK)
            out.append(room, needed);
    }
    return out;
}

void detok_stops(const ferrox_model* model) {
    ferrox_call_status st = fresh_status();
    ferrox_detok_stream* stream = nullptr;
    expect(ferrox_detok_stream_new(model, &stream, &st) == FERROX_CODE_OK, "a stream", st);
    // "bc" completes before "abcd" does: the text ends after "xa".
    expect(ferrox_detok_stream_add_stop(stream, "abcd", 4, &st) == FERROX_CODE_OK &&
               ferrox_detok_stream_add_stop(stream, "bc", 2, &st) == FERROX_CODE_OK,
           "two stop strings", st);
    expect(push_bytes(model, stream, "xabcd", st) == "xa" && ferrox_detok_stream_stopped(stream),
           "the stop that completes first cuts the text", st);
    expect(ferrox_detok_stream_add_stop(stream, "z", 1, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "begun"),
           "a stop after the first push is refused", st);
    ferrox_detok_stream_free(stream);

    // Held back while it may begin a stop, written at the end when none completed.
    expect(ferrox_detok_stream_new(model, &stream, &st) == FERROX_CODE_OK, "a stream", st);
    expect(ferrox_detok_stream_add_stop(stream, "bc", 2, &st) == FERROX_CODE_OK, "a stop", st);
    char room[64];
    size_t needed = 0;
    expect(push_bytes(model, stream, "ab", st) == "a" &&
               ferrox_detok_stream_push(stream, -1, room, sizeof room, &needed, &st) ==
                   FERROX_CODE_OK &&
               std::string(room, needed) == "b" && !ferrox_detok_stream_stopped(stream),
           "the held-back 'b' comes out at the end", st);
    ferrox_detok_stream_free(stream);

    expect(ferrox_detok_stream_new(model, &stream, &st) == FERROX_CODE_OK, "a stream", st);
    const std::string long_stop(1025, 'a');
    expect(ferrox_detok_stream_add_stop(stream, long_stop.data(), long_stop.size(), &st) ==
                   FERROX_CODE_INVALID_ARGUMENT &&
               mentions(st, "1024"),
           "a stop string over 1024 bytes is refused, naming the limit", st);
    expect(ferrox_detok_stream_add_stop(nullptr, "a", 1, &st) == FERROX_CODE_INVALID_ARGUMENT &&
               ferrox_detok_stream_stopped(nullptr) == 0,
           "a NULL stream is refused", st);
    ferrox_detok_stream_free(stream);
}

}  // namespace

int main(int argc, char** argv) {
    ferrox_model* model = nullptr;
    if (const int code = ferrox::test::load_model_argument(argc, argv, "c_api_reports", &model))
        return code;
    ferrox_call_status st = fresh_status();
    facts_and_capacity(model);
    residency(model);
    uint64_t calls_before = 0;
    expect(ferrox_model_kernel_calls(model, &calls_before, nullptr, &st) == FERROX_CODE_OK,
           "kernel calls before any decode", st);
    profile(model);  // decodes
    kernel_report(model, calls_before);
    token_text(model);
    detok_small_buffer(model);
    detok_stops(model);
    ferrox_model_free(model);
    if (failures == 0) std::printf("ok: ferrox.h 0.2's reports and 0.3's stops on %s\n", argv[1]);
    return failures ? 1 : 0;
}
