// ferrox.h's threading contract on a real model: a context is one thread's
// at a time, and a call that enters it while another call runs gets
// FERROX_CODE_BUSY -- never a torn cache. One thread decodes in a loop while
// another asks for the KV usage in a loop; the second must see BUSY, every
// answer it gets otherwise must be whole (0 or the full prompt), and the
// context must decode normally afterwards.
//
//   c_api_threads MODEL.gguf   (exit 77 when the file is absent: skipped)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "c_api_status.h"
#include "ferrox/ferrox.h"

namespace {

using ferrox::test::fresh_status;

int fail(const char* what, const ferrox_call_status& st) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, st.message);
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    ferrox_model* model = nullptr;
    if (const int code = ferrox::test::load_model_argument(argc, argv, "c_api_threads", &model))
        return code;
    ferrox_call_status st = fresh_status();
    ferrox_context_params cp;
    ferrox_context_params_default(&cp);
    cp.n_ctx = 512;
    cp.n_batch = 128;
    ferrox_context* ctx = nullptr;
    if (ferrox_context_new(model, &cp, &ctx, &st) != FERROX_CODE_OK) return fail("context", st);

    // A prompt of 96 tokens of sequence 0; ids spread over the vocabulary.
    const uint32_t n = 96, vocab = ferrox_model_vocab(model);
    std::vector<int32_t> tokens(n), positions(n), seqs(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
        tokens[i] = static_cast<int32_t>((i * 7919u + 13u) % vocab);
        positions[i] = static_cast<int32_t>(i);
    }
    ferrox_batch batch;
    std::memset(&batch, 0, sizeof batch);
    batch.struct_size = sizeof batch;
    batch.n_tokens = n;
    batch.tokens = tokens.data();
    batch.positions = positions.data();
    batch.seq_ids = seqs.data();

    std::atomic<bool> seen_busy{false}, stop{false};
    std::atomic<int> decode_failures{0}, torn{0};
    std::thread decoder([&] {
        ferrox_call_status s = fresh_status();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!seen_busy && std::chrono::steady_clock::now() < deadline) {
            if (ferrox_kv_clear(ctx, &s) == FERROX_CODE_BUSY) continue;
            if (ferrox_decode(ctx, &batch, &s) != FERROX_CODE_OK) {
                // BUSY here means the watcher is inside: retry, it is brief.
                if (s.code != FERROX_CODE_BUSY) ++decode_failures;
            }
        }
        stop = true;
    });
    std::thread watcher([&] {
        ferrox_call_status s = fresh_status();
        while (!stop) {
            uint32_t used = 0, total = 0;
            const ferrox_code code = ferrox_kv_usage(ctx, &used, &total, &s);
            if (code == FERROX_CODE_BUSY) {
                if (std::strstr(s.message, "another thread") == nullptr) ++torn;
                seen_busy = true;
            } else if (code != FERROX_CODE_OK || (used != 0 && used != n) || total != 512) {
                ++torn;
            }
        }
    });
    decoder.join();
    watcher.join();

    int failures = 0;
    if (!seen_busy) {
        std::fprintf(stderr, "FAIL: no call saw FERROX_CODE_BUSY in 20 s of contention\n");
        ++failures;
    }
    if (decode_failures) {
        std::fprintf(stderr, "FAIL: %d decodes failed other than BUSY\n", decode_failures.load());
        ++failures;
    }
    if (torn) {
        std::fprintf(stderr, "FAIL: %d answers were not whole (or BUSY without its message)\n",
                     torn.load());
        ++failures;
    }
    // Still usable: a clean decode, the prompt's cells, and its logits.
    st = fresh_status();
    if (ferrox_kv_clear(ctx, &st) != FERROX_CODE_OK) return fail("clear after", st);
    if (ferrox_decode(ctx, &batch, &st) != FERROX_CODE_OK) return fail("decode after", st);
    uint32_t used = 0, total = 0;
    if (ferrox_kv_usage(ctx, &used, &total, &st) != FERROX_CODE_OK) return fail("usage after", st);
    const float* logits = nullptr;
    if (ferrox_logits(ctx, n - 1, &logits, &st) != FERROX_CODE_OK) return fail("logits after", st);
    if (used != n) {
        std::fprintf(stderr, "FAIL: %u cells used after the prompt, expected %u\n", used, n);
        ++failures;
    }
    ferrox_context_free(ctx);
    ferrox_model_free(model);
    if (failures == 0) std::printf("ok: BUSY seen under contention; the context decodes after\n");
    return failures ? 1 : 0;
}
